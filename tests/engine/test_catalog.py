"""The GPU catalog agrees with NVIDIA's facts (tests/reference/mig-profiles.json, the shared
reference): every model and profile, every product label as GPU Feature Discovery writes it
(`+` as `.`, `-SHARED`, `-MIG-INVALID`, pre-R470 names), real memory, and every one of the GPU
Operator's 81 default mig-parted layouts understood."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest

from policies.gpu.catalog import CATALOG, CatalogError
from policies.gpu.models import ESTIMATED_SHARE, GpuModel, label_name

REFERENCE = json.loads((Path(__file__).parents[1] / "reference" / "mig-profiles.json").read_text())
MODELS = REFERENCE["models"]
LAYOUTS = REFERENCE["default_mig_parted_config"]
GB200_EARLY = {"1g.24gb", "1g.24gb+me", "3g.95gb", "4g.95gb", "7g.189gb"}


def catalog_model(reference_key: str) -> GpuModel:
    """The catalog's model for a reference entry: the one its product labels name."""
    found = {CATALOG.from_product_label(label)[0] for label in MODELS[reference_key]["product_labels"]}
    assert len(found) == 1, f"{reference_key}: its labels name {[m.key for m in found]}"
    return found.pop()


@pytest.mark.parametrize("key", sorted(MODELS))
def test_every_reference_model_is_one_catalog_model_with_exactly_its_profiles(key):
    reference, model = MODELS[key], catalog_model(key)
    assert model.slices == reference["max_instances"]
    current = [(p.name, p.g, p.memory_gb, p.max_count) for p in model.profiles if not p.legacy]
    assert current == [(p["name"], p["g"], p["mem_gb"], p["max_count"]) for p in reference["profiles"]]


def test_early_gb200_profile_names_are_recognised_as_legacy_and_only_there():
    legacy = {(m.key, p.name) for m in CATALOG.models for p in m.profiles if p.legacy}
    assert legacy == {("GB200-186GB", name) for name in GB200_EARLY}


@pytest.mark.parametrize("key", sorted(MODELS))
def test_every_product_label_gfd_writes_names_its_model_and_split(key):
    reference, model = MODELS[key], catalog_model(key)
    for label in reference["product_labels"]:
        assert CATALOG.node_kind(label).model is model
        assert CATALOG.node_kind(f"{label}-SHARED").shared  # time-sliced or MPS
        assert CATALOG.node_kind(label.removeprefix("NVIDIA-")).model is model  # drivers before R470
        invalid = CATALOG.node_kind(f"{label}-MIG-INVALID")
        assert invalid.invalid and CATALOG.from_product_label(f"{label}-MIG-INVALID") is None
        for profile in reference["profiles"]:
            single = f"{label}-MIG-{label_name(profile['name'])}"
            assert "+" not in single  # GFD writes '+' as '.': a '+' is no valid label character
            assert CATALOG.from_product_label(single) == (model, model.profile(profile["name"]))
            assert CATALOG.node_kind(f"{single}-SHARED").profile is model.profile(profile["name"])
    for example in reference["product_labels_mig_single_example"]:
        assert CATALOG.from_product_label(example)[0] is model


def _observed(profile: dict) -> int | None:
    if "gi_mem_mib" in profile:
        return profile["gi_mem_mib"]
    if "observed_nvidia_smi_lgip" in profile:
        return math.floor(profile["observed_nvidia_smi_lgip"]["GiB"] * 1024)
    return None


@pytest.mark.parametrize("key", sorted(MODELS))
def test_real_memory_is_nvidias_figure_where_known_and_never_more_than_the_name(key):
    reference, model = MODELS[key], catalog_model(key)
    labelled = {
        k.split("nvidia.com/mig-")[1].removesuffix(".memory"): int(v)
        for k, v in reference.get("gfd_label_example", {}).items()
        if k.endswith(".memory")
    }
    for entry in reference["profiles"]:
        profile = model.profile(entry["name"])
        mib, source = profile.real_memory_mib()
        expected = _observed(entry) or labelled.get(label_name(entry["name"]))
        if expected is not None:
            assert (mib, source) == (expected, "observed"), entry["name"]
        assert mib <= entry["mem_gb"] * 1024  # the name rounds up


def test_an_estimate_is_below_every_real_to_named_ratio_observed_on_its_model_or_anywhere():
    ratios = [
        Fraction(_observed(p), p["mem_gb"] * 1024)
        for m in MODELS.values()
        for p in m["profiles"]
        if _observed(p) is not None
    ]
    assert ratios and min(ratios) > ESTIMATED_SHARE
    for model in CATALOG.models:
        observed = [Fraction(p.observed_mib, p.memory_gb * 1024) for p in model.profiles if p.observed_mib]
        for profile in model.profiles:
            mib, source = profile.real_memory_mib()
            if source == "estimated":
                assert Fraction(mib, profile.memory_gb * 1024) <= min(observed, default=ESTIMATED_SHARE)


def test_an_h100_1g_10gb_holds_9984_mib_as_its_node_labels_say():
    assert CATALOG.model("H100-80GB").profile("1g.10gb").real_memory_mib() == (9984, "observed")


def _pci(raw: str) -> str:
    return raw[:10].upper()


PCI = {_pci(raw): key for key, m in MODELS.items() for raw in m.get("pci_device_ids", [])}


def _serving(entry: dict) -> list[GpuModel]:
    """Catalog models an entry of a layout applies to: its device-filter's, else every model
    that has all its profiles within their counts."""
    if "device-filter" in entry:
        wanted = entry["device-filter"]
        wanted = [wanted] if isinstance(wanted, str) else wanted
        return [catalog_model(PCI[_pci(raw)]) for raw in wanted if _pci(raw) in PCI]
    devices = entry.get("mig-devices") or {}
    return [
        m
        for m in CATALOG.models
        if all(m.profile(name) is not None and count <= m.profile(name).max_count for name, count in devices.items())
    ]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_gpu_operator_default_layout_is_understood(layout):
    """Each entry applies to some model; that model fits it (counts, compute slices); its mixed
    resources name its profiles; a one-profile layout under the single strategy gives a product
    label naming that split, a mixed one `-MIG-INVALID` (nothing steered there); disabled MIG
    leaves whole GPUs."""
    assert len(LAYOUTS) == 81
    for entry in LAYOUTS[layout]:
        devices = entry.get("mig-devices") or {}
        models = _serving(entry)
        assert models, f"{layout}: no catalog model serves {entry}"
        for model in models:
            label = model.product_labels[0]
            if not entry["mig-enabled"] or not devices:
                assert CATALOG.from_product_label(label) == (model, None)
                continue
            used = sum(model.profile(name).g * count for name, count in devices.items())
            assert used <= model.slices, f"{layout} on {model.key}"
            for name, count in devices.items():
                profile = model.profile(name)
                assert count <= profile.max_count
                assert CATALOG.profile_for_resource(profile.resource) == name
            if len(devices) == 1:
                (name,) = devices
                assert CATALOG.from_product_label(f"{label}-MIG-{label_name(name)}") == (model, model.profile(name))
            else:
                assert CATALOG.from_product_label(f"{label}-MIG-INVALID") is None


def test_seven_one_g_slices_weigh_exactly_one_gpu():
    model = CATALOG.model("A100-80GB")
    assert sum([model.weight(model.profile("1g.10gb"))] * 7) == Fraction(1)


def test_the_same_profile_name_weighs_by_the_model_it_runs_on():
    assert CATALOG.weight("1g.24gb", (CATALOG.model("RTX-PRO-6000-96GB"),)) == Fraction(1, 4)
    assert CATALOG.weight("1g.24gb", (CATALOG.model("H100-94GB"),)) == Fraction(1, 7)


def test_plus_becomes_dot_in_mixed_resource_names():
    assert CATALOG.model("A100-80GB").profile("1g.10gb+me").resource == "nvidia.com/mig-1g.10gb.me"
    assert CATALOG.profile_for_resource("nvidia.com/mig-1g.10gb.me") == "1g.10gb+me"


def test_h100_96gb_is_an_alias_of_gh200_96gb_and_h20_is_of_its_family():
    assert CATALOG.model("H100-96GB") is CATALOG.model("GH200-96GB")
    assert CATALOG.from_product_label("NVIDIA-H20")[0] is CATALOG.model("GH200-96GB")


def test_an_unknown_model_names_the_closest_ones():
    with pytest.raises(CatalogError, match="closest: H100-80GB"):
        CATALOG.model("H100-80G")


def test_an_unknown_profile_names_the_closest_ones():
    with pytest.raises(CatalogError, match="closest: 1g.10gb"):
        CATALOG.check_profile("1g.11gb", (CATALOG.model("A100-80GB"),))
