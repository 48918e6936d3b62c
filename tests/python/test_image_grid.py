"""The candidate order Fovea tables for InternVL's grid rule (tests/image/data/python_grid_order.txt and
src/image/tiling_python_order.cc) must be the order the running Python produces."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "image"))
import make_grid_order  # noqa: E402


def test_grid_order_table_matches_python():
    table = open(os.path.join(ROOT, "tests", "image", "data", "python_grid_order.txt")).read()
    assert table == "".join(make_grid_order.lines())
    source = open(os.path.join(ROOT, "src", "image", "tiling_python_order.cc")).read()
    for line in make_grid_order.lines():
        assert f'"{line.strip()}",' in source
