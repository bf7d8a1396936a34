"""The GPU catalog agrees with shared/reference/mig-profiles.md."""

from fractions import Fraction

import pytest

from policies.gpu.catalog import CATALOG, CatalogError

REFERENCE = {
    "A30-24GB": (4, ["1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"]),
    "A100-40GB": (7, ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]),
    "A100-80GB": (7, ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]),
    "H100-80GB": (7, ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]),
    "H100-94GB": (7, ["1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"]),
    "H200-141GB": (7, ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]),
    "GH200-96GB": (7, ["1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"]),
    "GH200-144GB": (7, ["1g.18gb", "1g.18gb+me", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"]),
    "B200-180GB": (7, ["1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"]),
    "GB200-186GB": (7, ["1g.23gb", "1g.23gb+me", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"]),
    "B300-288GB": (7, ["1g.34gb", "1g.34gb+me", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb"]),
}
STANDARD_COUNTS = [7, 1, 4, 3, 2, 1, 1]


@pytest.mark.parametrize("key", sorted(REFERENCE))
def test_every_reference_model_has_exactly_its_profiles_and_slices(key):
    slices, names = REFERENCE[key]
    model = CATALOG.model(key)
    assert model.slices == slices
    assert [p.name for p in model.profiles] == names


@pytest.mark.parametrize("key", [k for k, (s, _) in REFERENCE.items() if s == 7])
def test_seven_slice_models_use_the_standard_instance_counts(key):
    assert [p.max_count for p in CATALOG.model(key).profiles] == STANDARD_COUNTS


def test_rtx_pro_6000_has_four_slices_and_its_variants():
    model = CATALOG.model("RTX-PRO-6000-96GB")
    assert model.slices == 4
    assert {"1g.24gb", "1g.24gb+me", "2g.48gb", "4g.96gb", "1g.24gb+gfx", "1g.24gb-me"} <= {
        p.name for p in model.profiles
    }


def test_seven_one_g_slices_weigh_exactly_one_gpu():
    model = CATALOG.model("A100-80GB")
    assert sum([model.weight(model.profile("1g.10gb"))] * 7) == Fraction(1)


def test_the_same_profile_name_weighs_by_the_model_it_runs_on():
    assert CATALOG.weight("1g.24gb", (CATALOG.model("RTX-PRO-6000-96GB"),)) == Fraction(1, 4)
    assert CATALOG.weight("1g.24gb", (CATALOG.model("H100-94GB"),)) == Fraction(1, 7)


def test_plus_becomes_dot_in_mixed_resource_names():
    assert CATALOG.model("A100-80GB").profile("1g.10gb+me").resource == "nvidia.com/mig-1g.10gb.me"
    assert CATALOG.profile_for_resource("nvidia.com/mig-1g.10gb.me") == "1g.10gb+me"


@pytest.mark.parametrize(
    "label, model, profile",
    [
        ("NVIDIA-A100-SXM4-80GB", "A100-80GB", None),
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB", None),
        ("NVIDIA-H200", "H200-141GB", None),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-40GB", "1g.5gb"),
    ],
    ids=["a100-80", "h100", "h200", "a100-40-single-strategy"],
)
def test_product_labels_identify_the_model_on_a_node(label, model, profile):
    found_model, found_profile = CATALOG.from_product_label(label)
    assert found_model.key == model
    assert (found_profile.name if found_profile else None) == profile


def test_h100_96gb_is_an_alias_of_gh200_96gb():
    assert CATALOG.model("H100-96GB") is CATALOG.model("GH200-96GB")


def test_an_unknown_model_names_the_closest_ones():
    with pytest.raises(CatalogError, match="closest: H100-80GB"):
        CATALOG.model("H100-80G")


def test_an_unknown_profile_names_the_closest_ones():
    with pytest.raises(CatalogError, match="closest: 1g.10gb"):
        CATALOG.check_profile("1g.11gb", (CATALOG.model("A100-80GB"),))
