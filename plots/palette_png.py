"""Saves a matplotlib figure as an 8-bit palette PNG, for every script of plots/.

The figures in results/ are committed: 256 colors chosen for each figure make it 2-3x smaller than
matplotlib's RGBA PNG, with no difference to see. The colors are chosen by libimagequant,
which Debian's python3-pil (matplotlib's dependency) is built with and whose dithering keeps a
colorbar's gradient smooth; a Pillow without it (PyPI's wheels) uses median cut, whose gradients
show steps under a magnifier.
"""
import io

from PIL import Image, features

METHOD = Image.Quantize.LIBIMAGEQUANT if features.check("libimagequant") else Image.Quantize.MEDIANCUT


def save_png(fig, path, dpi):
    rendered = io.BytesIO()
    fig.savefig(rendered, format="png", dpi=dpi)
    rendered.seek(0)
    Image.open(rendered).convert("RGB").quantize(256, method=METHOD).save(path, optimize=True)
