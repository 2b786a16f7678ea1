"""The sweep over transformers' encoder and vision families (tests/model_zoo.py,
tests/family_checks.py): most of them no other test uses (and BERT and ViT, whose shared kernels
were mis-paired at 4 layers), each built once, at 4 layers, checked as a user would."""

from __future__ import annotations

import family_checks
import model_zoo
import pytest

pytestmark = pytest.mark.slow  # one build per family

FAMILIES = model_zoo.SWEEP_ENCODERS


@pytest.mark.parametrize("name", FAMILIES)
def test_an_honest_build_agrees_with_pytorch_node_by_node(tmp_path, name):
    family_checks.compare_is_clean(name, tmp_path)


@pytest.mark.parametrize("name", [n for n in FAMILIES if model_zoo.is_text(n)])
def test_a_left_padded_batch_agrees_with_pytorch(tmp_path, name):
    family_checks.compare_is_clean(name, tmp_path, padding="left")


@pytest.mark.parametrize("name", model_zoo.VALUES_ENCODERS)
def test_an_honest_build_agrees_with_pytorch_value_by_value(tmp_path, name):
    family_checks.compare_is_clean(name, tmp_path, mode="FULL_TENSOR")


@pytest.mark.parametrize("name", FAMILIES)
def test_a_healthy_batch_passes_check(tmp_path, name):
    family_checks.healthy_batch_passes_check(name, tmp_path)


@pytest.mark.parametrize("name", FAMILIES)
def test_an_inf_weight_in_a_later_layer_is_named_at_its_line_and_layer(tmp_path, name):
    family_checks.planted_weight_is_named(name, tmp_path)


@pytest.mark.parametrize("name", model_zoo.SWAPPED_ENCODERS)
def test_an_activation_swapped_in_a_later_layer_is_the_first_divergence(tmp_path, name):
    family_checks.swapped_activation_is_named(name, tmp_path)
