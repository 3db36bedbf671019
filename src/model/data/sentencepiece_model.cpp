#include "sentencepiece_model.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "kpipe/core/error.hpp"
#include "kpipe/core/strings.hpp"

namespace kpipe::model::detail {

namespace {

// One field of a protobuf message: its number, wire type and value (a
// varint, or the bytes of a length-delimited field).
struct Field {
  std::uint64_t number = 0;
  int type = 0;
  std::uint64_t varint = 0;
  std::string_view bytes;
};

enum WireType { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

// Reads a message's fields in order; an encoding protobuf would refuse is
// an input error naming `where`.
class WireReader {
 public:
  WireReader(std::string_view message, const std::string& where) : rest_(message), where_(where) {}

  bool next(Field& field) {
    if (rest_.empty()) return false;
    const std::uint64_t key = read_varint();
    field.number = key >> 3;
    field.type = static_cast<int>(key & 7);
    if (field.number == 0) broken("field number 0");
    switch (field.type) {
      case varint:
        field.varint = read_varint();
        break;
      case fixed64:
      case fixed32:
        take(field.type == fixed64 ? 8 : 4);
        break;
      case length_delimited:
        field.bytes = take(read_varint());
        break;
      default:
        broken(fmt::format("wire type {}", field.type));
    }
    return true;
  }

 private:
  std::uint64_t read_varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (rest_.empty()) broken("a number cut short");
      const auto byte = static_cast<std::uint8_t>(rest_.front());
      rest_.remove_prefix(1);
      value |= std::uint64_t{byte & 0x7Fu} << shift;
      if ((byte & 0x80) == 0) return value;
    }
    broken("a number longer than ten bytes");
  }

  std::string_view take(std::uint64_t size) {
    if (size > rest_.size()) broken(fmt::format("a field of {} bytes where {} remain", size, rest_.size()));
    const std::string_view bytes = rest_.substr(0, size);
    rest_.remove_prefix(size);
    return bytes;
  }

  [[noreturn]] void broken(const std::string& what) const {
    throw input_error(
        fmt::format("{} is no SentencePiece model (its protobuf encoding is broken: {}); {}", where_, what, train_one));
  }

  std::string_view rest_;
  const std::string& where_;
};

// The fields kpipe checks (sentencepiece_model.proto's numbers), as
// protobuf reads them: repeated messages appended, a message given twice
// merged, a scalar given twice the last one. A field of another wire type
// than its own is an unknown field to protobuf, and skipped here too.
struct Piece {
  std::string_view text;
  std::uint64_t type = 1;  // NORMAL
};

struct ModelFields {
  std::vector<Piece> pieces;
  std::uint64_t model_type = 1;  // UNIGRAM
  std::int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;
  std::string_view normalizer_map, denormalizer_map;
};

namespace model_proto {
constexpr std::uint64_t pieces = 1, trainer_spec = 2, normalizer_spec = 3, denormalizer_spec = 5;
constexpr std::uint64_t piece_text = 1, piece_type = 3;
constexpr std::uint64_t model_type = 3, unk_id = 40, bos_id = 41, eos_id = 42, pad_id = 43;
constexpr std::uint64_t precompiled_charsmap = 2;
}  // namespace model_proto

ModelFields read_fields(std::string_view bytes, const std::string& where) {
  using namespace model_proto;
  ModelFields fields;
  Field field, inner;
  for (WireReader model(bytes, where); model.next(field);) {
    if (field.type != length_delimited) continue;
    WireReader message(field.bytes, where);
    if (field.number == pieces) {
      Piece& piece = fields.pieces.emplace_back();
      while (message.next(inner)) {
        if (inner.number == piece_text && inner.type == length_delimited) piece.text = inner.bytes;
        if (inner.number == piece_type && inner.type == varint) piece.type = inner.varint;
      }
    } else if (field.number == trainer_spec) {
      while (message.next(inner)) {
        if (inner.type != varint) continue;
        const auto id = static_cast<std::int32_t>(inner.varint);  // int32 as protobuf truncates it
        if (inner.number == model_type) fields.model_type = inner.varint;
        if (inner.number == unk_id) fields.unk_id = id;
        if (inner.number == bos_id) fields.bos_id = id;
        if (inner.number == eos_id) fields.eos_id = id;
        if (inner.number == pad_id) fields.pad_id = id;
      }
    } else if (field.number == normalizer_spec || field.number == denormalizer_spec) {
      std::string_view& map = field.number == normalizer_spec ? fields.normalizer_map : fields.denormalizer_map;
      while (message.next(inner)) {
        if (inner.number == precompiled_charsmap && inner.type == length_delimited) map = inner.bytes;
      }
    }
  }
  return fields;
}

// A trie larger than any spm_train writes (NFKC's is about 240 KB) is
// refused: walking it costs 256 reads per state.
constexpr std::size_t largest_trie_bytes = std::size_t{4} << 20;

std::uint32_t little_endian_u32(const char* bytes) {
  std::uint32_t value;
  std::memcpy(&value, bytes, sizeof value);
  return value;
}

// Why a precompiled character map (a 4-byte trie size, darts-clone's
// double array, then NUL-separated replacements) would make the library read
// outside it, or nullopt. The normaliser walks the array from unit 0: a
// state's base XOR the next byte is the unit it reads, whose label must be
// that byte; a unit with a leaf leads to a value unit, whose value is the
// offset of a replacement. Every state a text can reach is walked, so that
// no text read later goes outside the map.
std::optional<std::string> charsmap_damage(std::string_view map) {
  if (map.size() <= 4) return fmt::format("{} bytes, shorter than its header", map.size());
  const std::uint32_t trie_bytes = little_endian_u32(map.data());
  if (trie_bytes > map.size() - 4) {
    return fmt::format("its trie of {} bytes runs past the map's {}", trie_bytes, map.size());
  }
  if (trie_bytes > largest_trie_bytes) {
    return fmt::format("its trie of {} bytes is larger than kpipe reads ({})", trie_bytes, largest_trie_bytes);
  }
  const std::uint32_t units = trie_bytes / 4;
  const std::size_t replacement_bytes = map.size() - 4 - trie_bytes;
  if (units == 0) return std::string("its trie is empty");
  const auto unit = [&](std::uint32_t index) { return little_endian_u32(map.data() + 4 + std::size_t{index} * 4); };
  const auto offset = [](std::uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
  constexpr std::uint32_t has_leaf = 1u << 8, label_bits = (1u << 31) | 0xFFu, value_bits = (1u << 31) - 1;

  std::vector<bool> walked(units);
  std::vector<std::uint32_t> bases{offset(unit(0))};
  while (!bases.empty()) {
    const std::uint32_t base = bases.back();
    bases.pop_back();
    if ((base | 0xFFu) >= units) {
      return fmt::format("a state's units [{}, {}] lie past its {} units", base & ~0xFFu, base | 0xFFu, units);
    }
    if (walked[base]) continue;
    walked[base] = true;
    for (std::uint32_t byte = 0; byte < 256; ++byte) {
      const std::uint32_t child = unit(base ^ byte);
      if ((child & label_bits) != byte) continue;
      const std::uint32_t next = (base ^ byte) ^ offset(child);
      if ((child & has_leaf) != 0) {
        if (next >= units) return fmt::format("a leaf at unit {} lies past its {} units", next, units);
        const std::uint32_t replacement = unit(next) & value_bits;
        if (replacement >= replacement_bytes) {
          return fmt::format("a replacement starts at byte {} of its {} bytes of replacements", replacement,
                             replacement_bytes);
        }
      }
      bases.push_back(next);
    }
  }
  return std::nullopt;
}

void check_id(const char* name, std::int32_t id, std::size_t pieces, const std::string& where) {
  if (id < -1 || id >= static_cast<std::int64_t>(pieces)) {
    throw input_error(fmt::format("{}: its {} id {} is outside its {} pieces (or -1 for none); {}", where, name, id,
                                  pieces, train_one));
  }
}

}  // namespace

void check_sentencepiece_model(std::string_view bytes, const std::string& where) {
  const ModelFields fields = read_fields(bytes, where);
  if (fields.pieces.empty()) {
    throw input_error(fmt::format("{} is no SentencePiece model (no pieces); {}", where, train_one));
  }
  constexpr std::uint64_t unknown_type = 2, last_type = 6;
  for (std::size_t i = 0; i < fields.pieces.size(); ++i) {
    const Piece& piece = fields.pieces[i];
    if (piece.text.empty()) throw input_error(fmt::format("{}: piece {} is empty; {}", where, i, train_one));
    if (piece.text.find('\0') != std::string_view::npos) {
      throw input_error(
          fmt::format("{}: piece {} ('{}') holds a NUL byte; {}", where, i, printable(piece.text), train_one));
    }
    if (const std::size_t bad = invalid_utf8_offset(piece.text); bad != std::string_view::npos) {
      throw input_error(fmt::format("{}: piece {} ('{}') is not UTF-8 (byte {} of it); {}", where, i,
                                    printable(piece.text), bad, train_one));
    }
    if (piece.type == 0 || piece.type > last_type) {
      throw input_error(
          fmt::format("{}: piece {} ('{}') has type {}, which SentencePiece does not define (1 to {}); {}", where, i,
                      printable(piece.text), piece.type, last_type, train_one));
    }
  }
  if (fields.model_type == 0 || fields.model_type > 4) {
    throw input_error(
        fmt::format("{}: its model type {} is none SentencePiece defines (1 unigram, 2 BPE, 3 word, 4 char); {}", where,
                    fields.model_type, train_one));
  }
  if (fields.unk_id < 0 || static_cast<std::size_t>(fields.unk_id) >= fields.pieces.size()) {
    throw input_error(fmt::format("{}: its unknown id {} is outside its {} pieces; {}", where, fields.unk_id,
                                  fields.pieces.size(), train_one));
  }
  if (const Piece& unknown = fields.pieces[static_cast<std::size_t>(fields.unk_id)]; unknown.type != unknown_type) {
    throw input_error(fmt::format("{}: its unknown id {} names piece '{}', which is not of the unknown type; {}", where,
                                  fields.unk_id, printable(unknown.text), train_one));
  }
  check_id("beginning-of-sentence", fields.bos_id, fields.pieces.size(), where);
  check_id("end-of-sentence", fields.eos_id, fields.pieces.size(), where);
  check_id("padding", fields.pad_id, fields.pieces.size(), where);
  for (const auto& [map, name] :
       {std::pair{fields.normalizer_map, "normaliser"}, {fields.denormalizer_map, "denormaliser"}}) {
    if (map.empty()) continue;
    if (const auto damage = charsmap_damage(map)) {
      throw input_error(fmt::format("{}: its {}'s character map is damaged ({}); {}", where, name, *damage, train_one));
    }
  }
}

}  // namespace kpipe::model::detail
