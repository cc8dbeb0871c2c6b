"""thinc internals: each reliance of `spacy_elmo.ml.thinc_adapter` holds in the installed
thinc (these fail when a thinc release changes one), the ElmoModel's caches follow thinc's
optimizer steps through it, and the listener pickles without knowing how thinc's Model is
laid out."""

import pickle

import numpy as np
import pytest
import spacy
import torch
from thinc.api import SGD, Adam, PyTorchWrapper_v3

from spacy_elmo.errors import ElmoWarning
from spacy_elmo.ml.elmo_model import build_elmo_model, get_holder, set_bilm
from spacy_elmo.ml.listener import ElmoListener
from spacy_elmo.ml.thinc_adapter import gradients_stamp, torch_module

from ..conftest import make_random_bilm

X = np.linspace(-1, 1, 12, dtype="float32").reshape(4, 3)


def _linear_wrapper(**kwargs):
    torch.manual_seed(0)
    module = torch.nn.Linear(3, 2)
    return module, PyTorchWrapper_v3(module, **kwargs)


def test_torch_module_is_the_module_the_wrapper_holds():
    module, wrapper = _linear_wrapper()
    assert torch_module(wrapper) is module
    data = wrapper.to_bytes()
    with torch.no_grad():
        module.weight.zero_()
    wrapper.from_bytes(data)  # thinc's default deserializer loads into the module itself
    assert torch_module(wrapper) is module and module.weight.abs().sum() > 0
    replacement = torch.nn.Linear(3, 2)
    _, custom = _linear_wrapper(deserialize_model=lambda model, data, device: replacement)
    custom.from_bytes(data)  # what deserialize_model returns is the module from then on
    assert torch_module(custom) is replacement


def test_a_copied_wrapper_holds_a_copy_of_the_module():
    """Why the module is read from the shim every time: a reference kept beside it would
    still name the original in a copy."""
    module, wrapper = _linear_wrapper()
    copied = wrapper.copy()
    assert torch_module(copied) is not module
    assert torch.equal(torch_module(copied).weight, module.weight)
    with torch.no_grad():
        torch_module(copied).weight.add_(1.0)
    assert not torch.equal(torch_module(copied).weight, module.weight)


def test_gradients_stamp_changes_at_a_backward_pass_and_at_thincs_optimizer_step():
    module, wrapper = _linear_wrapper()
    assert gradients_stamp(module) == ()
    wrapper.predict(X)
    assert gradients_stamp(module) == ()
    Y, backprop = wrapper.begin_update(X)
    backprop(np.ones_like(Y))
    after_backward = gradients_stamp(module)
    assert len(after_backward) == 2  # weight and bias
    wrapper.predict(X)
    assert gradients_stamp(module) == after_backward
    for optimizer in (SGD(0.1), Adam(0.1)):
        before = gradients_stamp(module)
        weight = module.weight.detach().clone()
        Y, backprop = wrapper.begin_update(X)
        backprop(np.ones_like(Y))
        assert gradients_stamp(module) != before
        stepped = gradients_stamp(module)
        wrapper.finish_update(optimizer)
        assert not torch.equal(module.weight, weight)  # the step changed the weights
        assert gradients_stamp(module) != stepped  # and the stamp shows it


def _elmo_model():
    model = build_elmo_model(output_cache_mb=16.0)
    torch.manual_seed(0)
    set_bilm(model, make_random_bilm())
    return model


def test_elmo_model_serves_no_output_of_weights_an_optimizer_step_changed():
    model = _elmo_model()
    nlp = spacy.blank("en")
    docs = [nlp.make_doc("The bank raised its rates ."), nlp.make_doc("We sat on the river bank .")]
    first = model.predict(docs)  # fills the output cache and the word cache
    outputs, backprop = model.begin_update(docs)
    backprop([np.ones_like(o) for o in outputs])
    # between the backward pass and the step, outputs are those of the same weights
    for before, now in zip(first, model.predict(docs), strict=True):
        np.testing.assert_allclose(now, before, atol=1e-6)
    model.finish_update(Adam(0.01))
    stepped = model.predict(docs)
    fresh = build_elmo_model().from_bytes(model.to_bytes())  # no caches
    for before, now, expected in zip(first, stepped, fresh.predict(docs), strict=True):
        assert not np.allclose(now, before)
        np.testing.assert_allclose(now, expected, atol=1e-6)
    # without further steps the caches are kept
    cache, version = model.attrs["output_cache"], get_holder(model).bilm.version.key()
    hits = cache.hits
    model.predict(docs)
    assert cache.hits == hits + len(docs) and get_holder(model).bilm.version.key() == version


def test_a_copied_elmo_model_has_its_own_biLM():
    model = _elmo_model()
    copied = model.copy()
    assert get_holder(copied) is not get_holder(model)
    original, copy = get_holder(model).bilm, get_holder(copied).bilm
    assert copy is not None and original is not None and copy is not original
    assert all(torch.equal(a, b) for a, b in zip(original.state_dict().values(),
                                                 copy.state_dict().values(), strict=True))


def test_a_pickled_listener_keeps_its_settings_and_drops_its_batch_and_upstream():
    listener = ElmoListener("elmo", grad_factor=0.5)
    listener.set_upstream_dims(12, 3)
    listener.upstream = object()  # type: ignore[assignment]
    outputs = [np.ones((3, 2, 12), dtype="float32")]
    listener.receive(7, outputs, lambda d_outputs: [])  # a closure: cannot be pickled
    restored = pickle.loads(pickle.dumps(listener))
    assert listener.upstream is not None  # pickling left the listener as it was
    assert restored.upstream is None and restored.upstream_name == "elmo"
    assert (restored.get_dim("nO"), restored.get_dim("nL")) == (12, 3)
    assert restored.attrs == {"grad_factor": 0.5, "fed": True}
    # without its batch, it reads the layers from the docs (zeros where they have none)
    with pytest.warns(ElmoWarning, match="without ELMo layers"):
        (zeros,) = restored.predict([spacy.blank("en").make_doc("two words")])
    assert zeros.shape == (3, 2, 12) and not zeros.any()
