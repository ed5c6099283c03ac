"""Bad command-line input: every out-of-range or malformed argument is a one-line error
naming the option, exit 2, before any work starts."""

from __future__ import annotations

import pytest

from fuzz.cli import main

BAD = [
    (["run", "--pass", "upstream", "--budget", "-1"], "argument --budget: must be positive, got -1"),
    (["run", "--pass", "upstream", "--budget", "nan"], "argument --budget: must be a finite number, got nan"),
    (["run", "--pass", "upstream", "--budget", "inf"], "argument --budget: must be a finite number, got inf"),
    (
        ["run", "--pass", "upstream", "--max-examples", "0"],
        "argument --max-examples: must be positive, got 0",
    ),
    (
        ["run", "--pass", "upstream", "--max-examples", "1.5"],
        "argument --max-examples: expected a int, got '1.5'",
    ),
    (["run", "--pass", "upstream", "--workers", "0"], "argument --workers: must be positive, got 0"),
    (["run", "--pass", "upstream", "--timeout", "-3"], "argument --timeout: must be positive, got -3"),
    (
        ["run", "--pass", "upstream", "--shrink-seconds", "0"],
        "argument --shrink-seconds: must be positive, got 0",
    ),
    (["run", "--pass", "upstream", "--seed", "abc"], "argument --seed: invalid int value: 'abc'"),
    (["run", "--pass", "nonesuch"], "unknown pass 'nonesuch'"),
    (["run"], "the following arguments are required: --pass"),
    (["bench", "--rounds", "0", "--isolation"], "argument --rounds: must be positive, got 0"),
    (["effectiveness", "--number", "-2"], "argument --number: must be positive, got -2"),
    (["render", "corpus/missing.json", "--script"], "corpus/missing.json: file: No such file or directory"),
    (["promote", "corpus/missing.json"], "corpus/missing.json: file:"),
    (["file-issues", "corpus", "--repo", "no-slash"], "--repo 'no-slash': expected OWNER/NAME"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
]


@pytest.mark.parametrize(("argv", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_arguments_exit_2_naming_the_option(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err, err
