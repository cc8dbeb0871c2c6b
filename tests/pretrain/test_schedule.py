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
    # cosine is not linear: a quarter of the way it is cos^2(pi/8), not 0.75
    cosine = PretrainConfig(lr_schedule="cosine", max_steps=100)
    assert lr_factor(cosine, 25) == pytest.approx(math.cos(math.pi / 8) ** 2)  # 0.8536
    assert lr_factor(cosine, 100) == pytest.approx(0.0, abs=1e-12)
    # warmup ramps every schedule, then the schedule starts from 1 over the remaining steps
    assert factors("linear", warmup=10)[0] == 0.1
    warm = PretrainConfig(lr_schedule="cosine", warmup_steps=10, max_steps=110)
    assert [lr_factor(warm, s) for s in (4, 9, 10, 60)] == pytest.approx([0.5, 1.0, 1.0, 0.5])
    assert factors("inverse_sqrt", warmup=10)[0] == 0.1  # warming up: (0 + 1) / 10
    assert math.isclose(factors("inverse_sqrt", warmup=10)[2], math.sqrt(10 / 100))
