"""Function hooks (global and per node) and the thread-local configuration."""

from __future__ import annotations

import io
import threading

import pytest

import agnograd
import agnograd.functions as F
from agnograd import FunctionHook, PrintHook, TimerHook, Variable


class Recording(FunctionHook):
    """Logs every callback with the function's label and what it was given."""

    name = "Recording"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def forward_preprocess(self, function, in_data):
        self.calls.append(("forward_preprocess", function.label, in_data))

    def forward_postprocess(self, function, in_data):
        self.calls.append(("forward_postprocess", function.label, in_data))

    def backward_preprocess(self, function, in_nodes, out_grad):
        self.calls.append(("backward_preprocess", function.label, in_nodes, out_grad))

    def backward_postprocess(self, function, in_nodes, out_grad):
        self.calls.append(("backward_postprocess", function.label, in_nodes, out_grad))


def _in_thread(fn):
    """Run ``fn`` in a new thread; return its result or re-raise its exception here."""
    outcome = {}

    def run():
        try:
            outcome["value"] = fn()
        except BaseException as error:  # handed back to the test
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# -- hooks -------------------------------------------------------------------------------


def test_custom_hook_gets_its_four_callbacks_in_order(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    with Recording() as hook:
        y = F.sum(F.exp(x))
        y.backward()
    events = [(c[0], c[1]) for c in hook.calls]
    assert events == [
        ("forward_preprocess", "Exp"),
        ("forward_postprocess", "Exp"),
        ("forward_preprocess", "Sum"),
        ("forward_postprocess", "Sum"),
        ("backward_preprocess", "Sum"),
        ("backward_postprocess", "Sum"),
        ("backward_preprocess", "Exp"),
        ("backward_postprocess", "Exp"),
    ]
    forward_inputs = hook.calls[0][2]
    assert forward_inputs[0] is x.array  # raw arrays, not Variables
    backward_nodes = hook.calls[6][2]
    assert backward_nodes[0] is x.node
    (gy,) = hook.calls[6][3]
    backend.assert_close(gy, [1.0, 1.0])


def test_hook_is_removed_after_the_block_even_on_error(backend):
    hook = Recording()

    def fail_inside():
        with hook:
            assert "Recording" in agnograd.config.function_hooks
            raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        fail_inside()
    assert "Recording" not in agnograd.config.function_hooks
    F.exp(Variable(backend.asarray([1.0])))
    assert hook.calls == []


def test_hook_names_are_unique_per_thread():
    with Recording(), pytest.raises(KeyError, match="Recording"), Recording():
        pass
    assert agnograd.config.function_hooks == {}


def test_print_hook_prints_forward_and_backward_lines(backend):
    out = io.StringIO()
    x = Variable(backend.asarray([[1.0, 2.0]]))
    with PrintHook(file=out):
        y = F.sum(x * x)
        y.backward()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("forward  Mul")
    assert lines[1].startswith("forward  Sum")
    assert lines[2].startswith("backward Sum")
    assert lines[3].startswith("backward Mul")
    assert lines[0].count("(1, 2), float32") == 2  # both inputs are described
    assert "(1, 2), float32" in lines[3]  # so is the gradient Mul receives


def test_print_hook_defaults_to_stdout(backend, capsys):
    with PrintHook():
        F.exp(Variable(backend.asarray([1.0])))
    printed = capsys.readouterr().out
    assert printed.startswith("forward  Exp")
    assert "(1), float32" in printed


def test_timer_hook_records_each_function(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    with TimerHook() as timer:
        y = F.sum(F.exp(x) * F.exp(x))
        y.backward()
    labels = [label for label, _ in timer.call_history]
    assert labels.count("Exp") == 4  # two forwards, two backwards
    assert labels.count("Mul") == 2
    assert labels.count("Sum") == 2
    assert all(isinstance(t, float) for _, t in timer.call_history)
    summary = timer.summary()
    assert summary["Exp"]["occurrence"] == 4
    # The summary adds up the history (no claim about how long anything took).
    exp_times = [t for label, t in timer.call_history if label == "Exp"]
    assert summary["Exp"]["elapsed_time"] == pytest.approx(sum(exp_times))
    assert timer.total_time() == pytest.approx(sum(t for _, t in timer.call_history))


def test_local_hook_on_one_node(backend):
    x = Variable(backend.asarray([1.0, 2.0]))
    h = F.exp(x)
    hook = Recording()
    h.creator.add_hook(hook)
    assert h.creator.local_function_hooks == {"Recording": hook}
    y = F.sum(h * 2.0)
    y.backward()
    assert [(c[0], c[1]) for c in hook.calls] == [
        ("backward_preprocess", "Exp"),
        ("backward_postprocess", "Exp"),
    ]
    h.creator.delete_hook("Recording")
    assert h.creator.local_function_hooks == {}
    with pytest.raises(KeyError):
        h.creator.delete_hook("Recording")


def test_local_hook_sees_forward_when_added_before_apply(backend):
    from agnograd.functions._arithmetic import MulConstant

    hook = Recording()
    node = MulConstant(3.0)
    node.add_hook(hook, name="mine")
    (y,) = node.apply((Variable(backend.asarray([1.0])),))
    assert [c[0] for c in hook.calls] == ["forward_preprocess", "forward_postprocess"]
    assert list(node.local_function_hooks) == ["mine"]
    F.exp(y)
    assert len(hook.calls) == 2  # other nodes are not hooked


def test_hooks_are_thread_local(backend):
    def work():
        F.exp(Variable(backend.asarray([1.0])))
        return dict(agnograd.config.function_hooks)

    with Recording() as hook:
        assert _in_thread(work) == {}
    assert hook.calls == []


# -- configuration -------------------------------------------------------------------------


def test_config_defaults():
    assert agnograd.config.enable_backprop is True
    assert "enable_backprop" in agnograd.config.show()


def test_using_config_sets_and_restores():
    with agnograd.using_config("enable_backprop", False):
        assert agnograd.config.enable_backprop is False
    assert agnograd.config.enable_backprop is True


def test_using_config_restores_after_an_error():
    with pytest.raises(ValueError, match="x"), agnograd.using_config("enable_backprop", False):
        raise ValueError("x")
    assert agnograd.config.enable_backprop is True


def test_using_config_with_a_new_name():
    with agnograd.using_config("my_flag", 3):
        assert agnograd.config.my_flag == 3
    with pytest.raises(AttributeError, match="my_flag"):
        agnograd.config.my_flag  # noqa: B018 - the lookup is the test


def test_no_backprop_and_force_backprop_nest(backend):
    x = Variable(backend.asarray([1.0]))
    with agnograd.no_backprop_mode():
        assert agnograd.config.enable_backprop is False
        assert (x * 2.0).creator is None
        with agnograd.force_backprop_mode():
            assert agnograd.config.enable_backprop is True
            assert (x * 2.0).creator is not None
            with agnograd.no_backprop_mode():
                assert (x * 2.0).creator is None
            assert (x * 2.0).creator is not None
        assert (x * 2.0).creator is None
    assert agnograd.config.enable_backprop is True
    assert (x * 2.0).creator is not None


def test_no_backprop_mode_is_thread_local(backend):
    inside = threading.Event()
    release = threading.Event()

    def other_thread():
        x = Variable(backend.asarray([1.0]))
        with agnograd.no_backprop_mode():
            inside.set()
            release.wait(timeout=30)
            return (x * 2.0).creator is None

    outcome = {}
    worker = threading.Thread(target=lambda: outcome.setdefault("inner", other_thread()))
    worker.start()
    try:
        assert inside.wait(timeout=30)
        # The other thread is inside no_backprop_mode; this one is not affected.
        assert agnograd.config.enable_backprop is True
        x = Variable(backend.asarray([1.0]))
        assert (x * 2.0).creator is not None
    finally:
        release.set()
        worker.join(timeout=60)
    assert outcome["inner"] is True


def test_new_thread_starts_with_defaults():
    with agnograd.no_backprop_mode():
        assert _in_thread(lambda: agnograd.config.enable_backprop) is True


def test_a_node_whose_own_hooks_were_deleted_runs_as_agnograd_s_own(backend, monkeypatch):
    # Adding a hook to a node sends it through the engine's general path; deleting
    # it must not make an agnograd node pass for a user's (whose backward the engine
    # calls another way).
    from agnograd.core import _engine_loop

    def refuse(*args, **kwargs):
        raise AssertionError("an agnograd node went through the path of a user's node")

    monkeypatch.setattr(_engine_loop, "_call_outside", refuse)
    x = Variable(backend.asarray([0.5, -1.0]))
    y = F.tanh(x)
    y.creator_node.add_hook(PrintHook(file=io.StringIO()), name="print")
    y.creator_node.delete_hook("print")
    F.sum(y).backward()
    backend.assert_close(x.grad, 1 - backend.to_numpy(y.array) ** 2, rtol=1e-6)
