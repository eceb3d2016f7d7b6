"""The reference server's lossy greedy verify (--lossy-greedy-gap): the runner-up wherever the target's top-2 gap is
below the knob, the argmax elsewhere and when it is off; a negative gap is refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from specsuite.refserver.cli import build_parser, resolve_config
from specsuite.refserver.sampling import lossy_greedy_argmax


def test_takes_the_runner_up_only_under_the_gap():
    probs = np.array([[0.5, 0.45, 0.05], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    # log gaps: 0.105 (runner-up id 1), 2.08 (clear), 0.288 (runner-up: one of the tied ids)
    assert lossy_greedy_argmax(probs, 0.25).tolist() == [1, 1, 2]
    assert lossy_greedy_argmax(probs, 0.3).tolist() == [1, 1, 0]
    assert lossy_greedy_argmax(probs, 0.0).tolist() == probs.argmax(axis=1).tolist()
    assert lossy_greedy_argmax(probs[None], 0.25).shape == (1, 3)  # (batch, positions) as the verify step has them


def test_the_knob_reaches_the_engine_and_refuses_a_negative_gap(capsys):
    parser = build_parser()
    args = parser.parse_args(["--lossy-greedy-gap", "0.25"])
    assert resolve_config(args, parser, eos_ids=()).lossy_greedy_gap == 0.25
    with pytest.raises(SystemExit):
        resolve_config(parser.parse_args(["--lossy-greedy-gap", "-1"]), parser, eos_ids=())
    assert "--lossy-greedy-gap must be >= 0" in capsys.readouterr().err
