"""What is sent to people: an entry as a reproducer script and as a GitHub issue (one
skeleton, each backend's own part beside it), the root causes named in TVM's issues, the
wording per symptom, a campaign's report, and filing through GitHub's API. No framework:
scripts and issues are text."""

__all__: list[str] = []
