#include "verification/tile_codes.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace lowbit::mma {

TileCodes tile_codes(const Atom& atom, int depth, std::span<const Tile> tiles) {
  const std::size_t mk = std::size_t(atom.m) * depth, kn = std::size_t(depth) * atom.n, mn = std::size_t(atom.m) * atom.n;
  TileCodes codes;
  codes.count = int(tiles.size());
  codes.a.resize(mk * tiles.size());
  codes.b.resize(kn * tiles.size());
  codes.c.resize(mn * tiles.size());
  codes.d.assign(mn * tiles.size(), 0);
  for (std::size_t t = 0; t < tiles.size(); ++t) {
    const Tile& tile = tiles[t];
    if (tile.a.size() != mk || tile.b.size() != kn || tile.c.size() != mn)
      throw std::invalid_argument("tile " + std::to_string(t) + " of " + atom.name.str() +
                                  ": field sizes do not match the instruction's shape");
    std::copy(tile.a.begin(), tile.a.end(), codes.a.begin() + std::ptrdiff_t(t * mk));
    std::copy(tile.b.begin(), tile.b.end(), codes.b.begin() + std::ptrdiff_t(t * kn));
    for (std::size_t i = 0; i < mn; ++i) {
      const auto code = accumulator_code(atom.c, tile.c[i]);
      if (!code)
        throw std::invalid_argument("tile " + std::to_string(t) + " of " + atom.name.str() + ": C word " +
                                    std::to_string(i) + " is not a value of the accumulator format");
      codes.c[t * mn + i] = *code;
    }
  }
  return codes;
}

void store_d(const Atom& atom, const TileCodes& codes, std::span<Tile> tiles) {
  const std::size_t mn = std::size_t(atom.m) * atom.n;
  for (std::size_t t = 0; t < tiles.size(); ++t) {
    tiles[t].d.resize(mn);
    for (std::size_t i = 0; i < mn; ++i) tiles[t].d[i] = accumulator_word(atom.c, codes.d[t * mn + i]);
  }
}

}  // namespace lowbit::mma
