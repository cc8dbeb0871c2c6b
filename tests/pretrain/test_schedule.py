import math

import pytest

from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.trainer import lr_factor


def test_learning_rate_schedules():
    def factors(schedule, warmup=0):
        config = PretrainConfig(lr_schedule=schedule, warmup_steps=warmup, max_steps=100)
        return [lr_factor(config, step) for step in (0, 50, 99)]

    assert factors("constant") == [1.0, 1.0, 1.0]
    assert factors("linear") == pytest.approx([1.0, 0.5, 0.01])
    assert math.isclose(factors("cosine")[1], 0.5)
    assert factors("inverse_sqrt", warmup=10)[0] == 0.1  # warming up: (0 + 1) / 10
    assert math.isclose(factors("inverse_sqrt", warmup=10)[2], math.sqrt(10 / 100))
