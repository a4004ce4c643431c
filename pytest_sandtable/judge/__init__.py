"""Judged soft scores (docs/judges.md): a panel of model judges answers each trial's
``judge:`` criteria (yes/no questions about its transcript) after the trial is graded.

The scores are reported beside pass^k and never change a verdict, a gate or the exit
status: nothing in this package is read by grading, the gates or the plugin's exit code.

- :mod:`.spec`: the ``--sandtable-judge`` spec (``claude:M,openai:M2``), parsed once.
- :mod:`.prompt`: what a judge is shown (policy, criterion, the part of the transcript
  the criterion reads), the verdict format it must answer in, parsing that answer and
  checking its quote against the transcript.
- :mod:`.cache`: verdicts kept by content (transcript, criterion, judge model), so a
  rerun of identical transcripts and ``regrade`` make no model calls.
- :mod:`.panel`: the judges' clients through the adapters (temperature 0, retries,
  timeouts), the budget (``--sandtable-judge-max-cost``), the majority verdict.
- :mod:`.scores`: judged scores per criterion, task and tag, with Wilson intervals.
- :mod:`.calibrate`: agreement with human labels (Cohen's kappa), test-retest flips.
- :mod:`.mutants`: passing transcripts altered to violate a criterion, and how many the
  panel catches.

This layer never imports pytest.
"""
