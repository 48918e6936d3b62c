"""Writes data/python_grid_order.txt: InternVL's candidate grids in the order Python produces them
(sorted(set(...)) by tile count; the set's order decides among equal counts), one line per (min, max):
"MIN MAX: i,j i,j ...". test_tiling.cc ports the rule over this exact order; test_image_grid.py checks that
the file still matches the running Python."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pillow_reference as pr  # noqa: E402


def lines():
    for max_num in range(1, 13):
        for min_num in range(1, max_num + 1):
            order = " ".join(f"{i},{j}" for i, j in pr.target_ratios(min_num, max_num))
            yield f"{min_num} {max_num}: {order}\n"


if __name__ == "__main__":
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "python_grid_order.txt")
    with open(out, "w") as f:
        f.writelines(lines())
