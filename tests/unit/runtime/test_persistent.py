"""Runtime kernels as phases of a persistent kernel (kernels.phase): which kernels have a phase
form and in which mode, what the form says of their buffers, and the persistent kernel built
from forms (grid barriers only where a phase depends on an earlier one). Persistent decode
steps of real decoders are tested in tests/models/test_persistent_decoding.py."""
from __future__ import annotations

import numpy as np
import pytest

from netpass.runtime.kernels import Stage, eltwise, gather, rowop
from netpass.runtime.kernels.common import Source
from netpass.runtime.kernels.decode import attention_decode
from netpass.runtime.kernels.decode_gemv import gemv
from netpass.runtime.kernels.phase import PL, PhaseCall, persistent, phase_of

F32 = np.dtype(np.float32)
ADD = Stage("{0} + {1}", [("in", 0), ("in", 1)], "float")


def test_gemv_is_a_group_phase_reading_a_and_b_writing_c():
    form = phase_of(gemv([], 0, [], 0, 32, None))
    assert form is not None and form.mode == "group"
    assert [b.split()[-1] for b in form.buffers] == ["A", "B", "C"]
    assert form.writes == (False, False, True)
    assert form.n_ints == 15 and form.local_arrays == 1


def test_a_folded_layernorm_declares_four_local_arrays_in_one_line():
    form = phase_of(gemv([], 0, [], 0, 32, (1e-5, True, True, True, True, False)))
    assert form is not None and form.local_arrays == 5
    assert "__local float nmu[" not in form.body  # (carved out of the shared block)


def test_kernels_with_nvidia_shuffles_keep_their_phase_form():
    """(their PTX helpers are one-line inline functions, renamed per phase)"""
    gemv_form = phase_of(gemv([], 0, [], 0, 32, None, 3, 8, 0, None, True))
    attention_form = phase_of(attention_decode([], [], 0, 64, 64, False, True, True, True))
    assert gemv_form is not None and attention_form is not None
    assert {"shfl_xor", "fmaxn"} <= set(gemv_form.helpers) & set(attention_form.helpers)
    assert "shfl_xor_p3(" in gemv_form.render("p3")


def test_elementwise_and_gather_kernels_are_item_phases():
    for src in (eltwise([F32, F32], F32, [ADD], 2, False), gather(F32, np.int64)):
        form = phase_of(src)
        assert form is not None and form.mode == "item", src.name
        assert form.local_arrays == 0


def test_decode_attention_is_a_group_phase_writing_the_cache_when_it_appends():
    appending = phase_of(attention_decode([], [], 0, 64, 64, False, True))
    reading = phase_of(attention_decode([], [], 0, 64, 64, False, False))
    assert appending is not None and reading is not None
    names = [b.split()[-1] for b in appending.buffers]
    assert dict(zip(names, appending.writes))["Kt"] is True
    assert dict(zip([b.split()[-1] for b in reading.buffers], reading.writes))["Kt"] is False


def test_row_kernels_have_a_form_that_only_fits_their_own_local_size():
    form = phase_of(rowop("mvn", F32, F32, {"eps": 1e-5, "normalize_variance": True,
                                            "inside_sqrt": True}))
    assert form is not None and form.mode == "group"  # (64 items: not a persistent group)


@pytest.mark.parametrize("text", [
    # a helper function beside the kernel
    "float twice(float x) { return 2 * x; }\n__kernel void k(__global float* y) "
    "{ y[get_global_id(0)] = twice(1.0f); }\n",
    # two kernels in one source
    "__kernel void k(__global float* y) { y[0] = 1; }\n"
    "__kernel void j(__global float* y) { y[0] = 2; }\n",
    # local memory through a pointer
    "__kernel void k(__global float* y, __local float* s) { s[0] = 1; y[0] = s[0]; }\n",
    # a work-item function the phase cannot stand for
    "__kernel void k(__global float* y) { y[get_global_linear_id()] = 1; }\n",
    # local memory inside a nested block
    "__kernel void k(__global float* y) { if (y[0] > 0) { __local float s[4]; s[0] = 1; "
    "y[0] = s[0]; } }\n",
])
def test_kernels_written_otherwise_have_no_phase_form(text):
    assert phase_of(Source(text, "k")) is None


def _call(src: Source, args: tuple, at: int, sync: bool, lws: tuple = (PL, 1, 1)) -> PhaseCall:
    form = phase_of(src)
    assert form is not None
    return PhaseCall(form, f"s{id(form) % 1000}", lws, args, at, sync)


def test_the_persistent_kernel_meets_only_where_a_phase_depends_on_an_earlier_one():
    g = gemv([], 0, [], 0, 32, None)
    calls = [_call(g, (0, 1, 2), 0, False), _call(g, (0, 3, 4), 18, False),
             _call(g, (2, 1, 5), 36, True)]
    src = persistent(calls, 6, 8192, ptx=False)
    assert src.text.count("grid_sync(bar, groups, &stop)") == 1
    assert src.text.count("void gemv_s") == 1  # (one function for the three launches)
    assert "reqd_work_group_size(256, 1, 1)" in src.text
    assert 'asm volatile("fence' not in src.text


def test_nvidia_fences_through_ptx():
    g = gemv([], 0, [], 0, 32, None)
    src = persistent([_call(g, (0, 1, 2), 0, False), _call(g, (2, 1, 3), 18, True)], 4, 8192,
                     ptx=True)
    assert 'asm volatile("fence.acq_rel.gpu;"' in src.text


def test_one_line_inline_helpers_are_renamed_with_their_phase():
    """The decode attention's key splits read the partials through ``sk_load`` helpers: two
    such forms in one persistent kernel each keep their own, so the program compiles."""
    from netpass.runtime.device import Engine, select_device
    from netpass.testing import RUNTIME_DEVICE
    split = [attention_decode([], [], 0, d, d, False, True, True) for d in (12, 16)]
    forms = [phase_of(s) for s in split]
    assert all(f is not None and f.helpers == ("sk_load4", "sk_load") for f in forms)
    text = forms[0].render("s7")
    assert "sk_load_s7(" in text and "sk_load(" not in text and "sk_load4_s7(" in text
    calls = [PhaseCall(f, f"s{i}", (PL, 1, 1), tuple(range(9 * i, 9 * i + 9)), 50 * i, i > 0)
             for i, f in enumerate(forms)]
    eng = Engine.get(select_device(RUNTIME_DEVICE))
    src = persistent(calls, 18, 16384, ptx=eng.mma == "ptx")
    assert eng.build(src.text) is not None
