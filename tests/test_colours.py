import numpy as np
from PIL import Image

from polarcatalog.data.colours import COLOUR_TABLE, colour_fractions, dominant_colours
from polarcatalog.data.pokemon import size_class
from polarcatalog.data.regions import foreground_mask


def test_each_table_colour_names_itself(solid_image):
    for name, prototypes in COLOUR_TABLE.items():
        if name == "white":
            continue  # a white block on white is background by construction (see the outline test)
        for rgb in prototypes:
            assert dominant_colours(solid_image([rgb])) == [name], rgb


def test_typical_shades_get_the_expected_names(solid_image):
    cases = {(255, 0, 0): "red", (0, 0, 255): "blue", (255, 255, 0): "yellow", (0, 128, 0): "green",
             (255, 165, 0): "orange", (128, 0, 128): "purple", (255, 192, 203): "pink", (139, 69, 19): "brown",
             (0, 0, 0): "black", (169, 169, 169): "gray", (60, 60, 60): "gray", (120, 170, 150): "green",
             (130, 175, 190): "blue", (240, 170, 130): "orange", (185, 177, 186): "gray"}
    for rgb, name in cases.items():
        assert dominant_colours(solid_image([rgb]))[0] == name, (rgb, name)


def test_fractions_and_ordering(solid_image):
    # three vertical bands of equal width: blue, yellow, red
    fr = colour_fractions(solid_image([(0, 0, 255), (255, 255, 0), (255, 0, 0)], size=128, margin=14))
    assert set(fr) == {"blue", "yellow", "red"}
    assert all(abs(v - 1 / 3) < 0.03 for v in fr.values())
    assert abs(sum(fr.values()) - 1) < 1e-9
    # 3/4 green, 1/4 black: green first; black kept only when above the threshold
    im = solid_image([(0, 128, 0)] * 3 + [(0, 0, 0)], size=128, margin=0)
    assert dominant_colours(im, min_fraction=0.2) == ["green", "black"]
    assert dominant_colours(im, min_fraction=0.3) == ["green"]


def test_white_body_inside_an_outline_is_foreground():
    a = np.full((60, 60, 3), 255, np.uint8)
    a[10:50, 10:50] = (0, 0, 0)  # black outline...
    a[12:48, 12:48] = (255, 255, 255)  # ...around a white body
    mask = foreground_mask(a)
    assert mask[30, 30] and not mask[2, 2]
    assert dominant_colours(Image.fromarray(a)) == ["white", "black"]


def test_blank_image_has_no_colours():
    assert colour_fractions(Image.new("RGB", (32, 32), "white")) == {}


def test_size_class_bins():
    bins = [0.5, 1.0, 2.0, 4.0]
    assert [size_class(h, bins) for h in (0.1, 0.5, 0.99, 1.0, 3.9, 4.0, 14.5)] == [
        "tiny", "small", "small", "medium-sized", "large", "huge", "huge"]
    assert size_class(float("nan"), bins) == "unknown-size"
