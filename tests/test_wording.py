"""The one per-symptom table of issue and script wording covers every symptom a pass can
show, and what has no row still gets a plain wording."""

from __future__ import annotations

from fuzz.oracle.verdict import Symptom
from fuzz.render.wording import WORDING, wording

#: symptoms about TVM's lowering of the unfolded program, never a pass's finding
NOT_THE_PASS = {Symptom.BASELINE_OUT_OF_TOLERANCE, Symptom.BASELINE_SIGNATURE_CHANGE}


def test_every_pass_symptom_has_a_wording() -> None:
    assert set(Symptom) - NOT_THE_PASS == set(WORDING)


def test_titles_name_the_exception_or_say_there_was_one() -> None:
    raises = wording(Symptom.PASS_EXCEPTION)
    assert raises.title("TypeError") == "raises TypeError"
    assert raises.title("") == "raises an exception"
    assert wording(Symptom.CRASH).title("SIGSEGV") == "crashes the process (SIGSEGV)"


def test_an_entry_without_a_row_is_worded_by_its_name() -> None:
    plain = wording(None, "declined")
    assert plain.headline == "fails: declined"
    assert plain.exits == wording(Symptom.OUT_OF_TOLERANCE).exits
    assert "dies" in wording(Symptom.CRASH).shows and "300 s" in wording(Symptom.TIMEOUT).exits
