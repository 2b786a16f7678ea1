"""The sweep over transformers' families (tests/model_zoo.py, tests/family_checks.py): most of
them no other test uses (and Llama, BERT and ViT, whose shared kernels were mis-paired at 4
layers), each built once, at 4 layers, checked as a user would. One class per half (decoders;
encoders and vision), so that `--dist loadscope` runs the halves on both cores."""

from __future__ import annotations

import family_checks
import model_zoo
import pytest

pytestmark = pytest.mark.slow  # one build per family


def over(families: str):
    """The class's list of families a check runs over (else all its `families`)."""

    def mark(test):
        test.over = families
        return test

    return mark


def pytest_generate_tests(metafunc):
    metafunc.parametrize("name", getattr(metafunc.cls, getattr(metafunc.function, "over", "families")))


class _Sweep:
    families: tuple[str, ...] = ()
    left_padded: tuple[str, ...] = ()  # the text families
    values: tuple[str, ...] = ()  # compared value by value (FULL_TENSOR) too
    swapped: tuple[str, ...] = ()  # with an activation converted differently in a later layer

    def test_an_honest_build_agrees_with_pytorch_node_by_node(self, tmp_path, name):
        family_checks.compare_is_clean(name, tmp_path)

    @over("left_padded")
    def test_a_left_padded_batch_agrees_with_pytorch(self, tmp_path, name):
        family_checks.compare_is_clean(name, tmp_path, padding="left")

    @over("values")
    def test_an_honest_build_agrees_with_pytorch_value_by_value(self, tmp_path, name):
        family_checks.compare_is_clean(name, tmp_path, mode="FULL_TENSOR")

    def test_a_healthy_batch_passes_check(self, tmp_path, name):
        family_checks.healthy_batch_passes_check(name, tmp_path)

    def test_an_inf_weight_in_a_later_layer_is_named_at_its_line_and_layer(self, tmp_path, name):
        family_checks.planted_weight_is_named(name, tmp_path)

    @over("swapped")
    def test_an_activation_swapped_in_a_later_layer_is_the_first_divergence(self, tmp_path, name):
        family_checks.swapped_activation_is_named(name, tmp_path)


class TestDecoders(_Sweep):
    families = left_padded = model_zoo.SWEEP_DECODERS
    values, swapped = model_zoo.VALUES_DECODERS, model_zoo.SWAPPED_DECODERS


class TestEncoders(_Sweep):
    families = model_zoo.SWEEP_ENCODERS
    left_padded = tuple(name for name in model_zoo.SWEEP_ENCODERS if model_zoo.is_text(name))
    values, swapped = model_zoo.VALUES_ENCODERS, model_zoo.SWAPPED_ENCODERS
