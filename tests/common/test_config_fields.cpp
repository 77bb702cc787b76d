// Table-driven config structs (common/config_fields.h): value parsing (integers written by
// people: 1e6, 1_000_000), the shortest round-trip double text, FieldTable's apply / to_kv
// with errors naming the place and the key, enum choice fields (word <-> value), and the one
// entry per field: its default (the struct's constructor), its range check and its help line.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/config_fields.h"
#include "common/error.h"

namespace tupe {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(CommonConfigFields, IntegersAsPeopleWriteThem) {
  EXPECT_EQ(parse_int("k", "42"), 42);
  EXPECT_EQ(parse_int("k", "-7"), -7);
  EXPECT_EQ(parse_int("k", "1e6"), 1000000);
  EXPECT_EQ(parse_int("k", "1_000_000"), 1000000);
  EXPECT_EQ(parse_int("k", "2.5e3"), 2500);
  EXPECT_EQ(parse_int("k", "9223372036854775807"), std::numeric_limits<int64_t>::max());
  for (const char* bad : {"", "abc", "1.5", "12x", " 5", "0x10", "1e19", "nan", "inf"})
    EXPECT_EQ(error_of([&] { parse_int("steps", bad); }),
              std::string("key 'steps': expected an integer, got '") + bad + "'");
}

TEST(CommonConfigFields, FiniteDoublesAndBooleans) {
  EXPECT_EQ(parse_double("k", "1e-5"), 1e-5);
  EXPECT_EQ(parse_double("k", "-0.25"), -0.25);
  EXPECT_EQ(parse_double("k", "3"), 3.0);
  // Python's float() on the stripped text (docs/formats.md "Numbers"): spaces on either side.
  EXPECT_EQ(parse_double("k", "0.1 "), 0.1);
  EXPECT_EQ(parse_double("k", " +2.5"), 2.5);
  for (const char* bad : {"", "inf", "-inf", "nan", "1e400", "1,5", "0x1p2", "1 0"})
    EXPECT_EQ(error_of([&] { parse_double("lr", bad); }),
              std::string("key 'lr': expected a finite number, got '") + bad + "'");
  for (const char* yes : {"true", "1", "yes", "on"}) EXPECT_TRUE(parse_bool("k", yes)) << yes;
  for (const char* no : {"false", "0", "no", "off"}) EXPECT_FALSE(parse_bool("k", no)) << no;
  EXPECT_EQ(error_of([] { parse_bool("shuffle", "True"); }), "key 'shuffle': expected true/false, got 'True'");
}

TEST(CommonConfigFields, ShortestDoubleTextReadsBackExactly) {
  EXPECT_EQ(format_double(0.1), "0.1");
  EXPECT_EQ(format_double(1e-5), "1e-05");
  EXPECT_EQ(format_double(3.0), "3");
  EXPECT_EQ(format_double(1e-4), "1e-04");  // shorter than 0.0001
  EXPECT_EQ(format_double(0.001), "0.001");
  EXPECT_EQ(format_double(0.1 + 0.2), "0.30000000000000004");
  for (const double v : {0.1 + 0.2, 1.0 / 3.0, 6.02214076e23, -2.5e-300})
    EXPECT_EQ(parse_double("k", format_double(v)), v) << format_double(v);
}

enum class Color { kRed, kBlue };
constexpr Choice<Color> kColorWords[] = {{"red", Color::kRed}, {"blue", Color::kBlue}};

struct Sample {
  Sample() { fields().reset(*this); }
  int64_t steps;
  double lr;
  bool shuffle;
  std::string name;
  Color color;

  static const FieldTable<Sample>& fields() {
    static const FieldTable<Sample> table = [] {
      FieldTable<Sample> t("train");
      t.integer("steps", &Sample::steps, 10, "optimizer steps", "run length")
          .positive()
          .real("lr", &Sample::lr, 1e-4, "", "peak learning rate")
          .positive()
          .at_most(1)
          .boolean("shuffle", &Sample::shuffle, true, "shuffle the data")
          .text("name", &Sample::name, "tiny", "run name")
          .not_empty()
          .choice("color", &Sample::color, kColorWords, Color::kRed, "the colour");
      return t;
    }();
    return table;
  }
};

TEST(CommonConfigFields, TableAppliesAndPrintsEveryField) {
  Sample s;
  EXPECT_EQ(Sample::fields().to_kv(s),
            (KeyValues{{"steps", "10"}, {"lr", "1e-04"}, {"shuffle", "true"}, {"name", "tiny"}, {"color", "red"}}));
  Sample::fields().apply(s, {{"steps", "1e3"}, {"lr", "5e-4"}, {"shuffle", "off"}, {"name", "a b"}, {"color", "blue"}},
                         "test");
  EXPECT_EQ(s.steps, 1000);
  EXPECT_EQ(s.lr, 5e-4);
  EXPECT_FALSE(s.shuffle);
  EXPECT_EQ(s.name, "a b");
  EXPECT_EQ(s.color, Color::kBlue);
  // to_kv then apply gives the same struct back.
  Sample t;
  Sample::fields().apply(t, Sample::fields().to_kv(s), "round trip");
  EXPECT_EQ(Sample::fields().to_kv(t), Sample::fields().to_kv(s));
  ASSERT_NE(Sample::fields().find("lr"), nullptr);
  EXPECT_EQ(Sample::fields().find("lr")->help, "peak learning rate");
  EXPECT_EQ(Sample::fields().find("LR"), nullptr);
}

TEST(CommonConfigFields, OneEntryGivesTheDefaultTheRangeAndTheHelpLine) {
  // The defaults come from the table: a new struct holds them, and defaults() prints them.
  const Sample s;
  EXPECT_EQ(s.steps, 10);
  EXPECT_EQ(s.lr, 1e-4);
  EXPECT_TRUE(s.shuffle);
  EXPECT_EQ(s.name, "tiny");
  EXPECT_EQ(s.color, Color::kRed);
  EXPECT_EQ(Sample::fields().defaults(), Sample::fields().to_kv(s));
  EXPECT_NO_THROW(Sample::fields().check(s));
  // The help line: meaning (unit; allowed values).
  EXPECT_EQ(Sample::fields().find("steps")->describe(), "run length (optimizer steps; positive)");
  EXPECT_EQ(Sample::fields().find("lr")->describe(), "peak learning rate ((0, 1])");
  EXPECT_EQ(Sample::fields().find("shuffle")->describe(), "shuffle the data");
  EXPECT_EQ(Sample::fields().find("name")->describe(), "run name (not empty)");
  EXPECT_EQ(Sample::fields().find("color")->describe(), "the colour (red | blue)");
  // Out of range: "<section>.<key>: must be ..., got <value>".
  Sample bad;
  bad.steps = 0;
  EXPECT_EQ(error_of([&] { Sample::fields().check(bad); }), "train.steps: must be positive, got 0");
  bad = Sample();
  bad.lr = 2;
  EXPECT_EQ(error_of([&] { Sample::fields().check(bad); }), "train.lr: must be in (0, 1], got 2");
  bad = Sample();
  bad.name = "";
  EXPECT_EQ(error_of([&] { Sample::fields().check(bad); }), "train.name: must not be empty");
  // reset() restores every default.
  bad.steps = 5;
  Sample::fields().reset(bad);
  EXPECT_EQ(Sample::fields().to_kv(bad), Sample::fields().defaults());
}

struct Ranges {
  Ranges() { fields().reset(*this); }
  int64_t length, threads;
  double ratio, factor;

  static const FieldTable<Ranges>& fields() {
    static const FieldTable<Ranges> table = [] {
      FieldTable<Ranges> t("r");
      t.integer("length", &Ranges::length, 0, "tokens", "0 = the model's").at_least(3).or_zero();
      t.integer("threads", &Ranges::threads, 1, "", "threads").at_least(1).at_most(256);
      t.real("ratio", &Ranges::ratio, 0, "fraction", "share").at_least(0).below(1);
      t.real("factor", &Ranges::factor, 2, "factor", "growth").above(1);
      t.removed("old_key", "is no longer read: use length instead");
      return t;
    }();
    return table;
  }
};

TEST(CommonConfigFields, RangesAtTheirEdgesAndRemovedKeys) {
  Ranges r;
  const auto& t = Ranges::fields();
  auto violation = [&](const char* key) { return t.find(key)->violation(r); };
  for (int64_t v : {int64_t{0}, int64_t{3}, int64_t{1000}}) {
    r.length = v;
    EXPECT_EQ(violation("length"), "") << v;
  }
  for (int64_t v : {int64_t{1}, int64_t{2}, int64_t{-1}}) {
    r.length = v;
    EXPECT_EQ(violation("length"), "must be 0 or >= 3, got " + std::to_string(v));
  }
  r = Ranges();
  r.threads = 256;
  EXPECT_EQ(violation("threads"), "");
  r.threads = 257;
  EXPECT_EQ(violation("threads"), "must be in [1, 256], got 257");
  r.threads = 0;
  EXPECT_EQ(violation("threads"), "must be in [1, 256], got 0");
  r = Ranges();
  r.ratio = 1;
  EXPECT_EQ(violation("ratio"), "must be in [0, 1), got 1");
  r.ratio = 0.999;
  EXPECT_EQ(violation("ratio"), "");
  r.factor = 1;
  EXPECT_EQ(violation("factor"), "must be > 1, got 1");
  EXPECT_EQ(t.find("length")->describe(), "0 = the model's (tokens; 0 or >= 3)");
  EXPECT_EQ(t.find("factor")->describe(), "growth (factor; > 1)");
  // The reference's type column.
  EXPECT_EQ(t.find("length")->type, "integer");
  EXPECT_EQ(t.find("ratio")->type, "real");
  // A removed key is refused in words, an unknown one only named.
  EXPECT_EQ(error_of([&] { t.apply(r, {{"old_key", "1"}}, "x.ini [r]"); }),
            "x.ini [r]: key 'old_key' is no longer read: use length instead");
  EXPECT_EQ(error_of([&] { t.apply(r, {{"older_key", "1"}}, "x.ini [r]"); }), "x.ini [r]: unknown key 'older_key'");
  EXPECT_EQ(t.removed_keys().count("old_key"), 1u);
}

TEST(CommonConfigFields, ErrorsNameThePlaceAndTheKey) {
  Sample s;
  EXPECT_EQ(error_of([&] {
              Sample::fields().apply(s, {{"stepz", "1"}}, "configs/tiny.ini [train]");
            }),
            "configs/tiny.ini [train]: unknown key 'stepz' (did you mean train.steps?)");
  // No key is near enough: no suggestion.
  EXPECT_EQ(error_of([&] { Sample::fields().apply(s, {{"warmup", "1"}}, "x.ini [train]"); }),
            "x.ini [train]: unknown key 'warmup'");
  EXPECT_EQ(error_of([&] {
              Sample::fields().apply(s, {{"steps", "ten"}}, "configs/tiny.ini [train]");
            }),
            "configs/tiny.ini [train]: key 'steps': expected an integer, got 'ten'");
  EXPECT_EQ(error_of([&] {
              Sample::fields().apply(s, {{"color", "green"}}, "--train.color");
            }),
            "--train.color: key 'color': expected red or blue, got 'green'");
}

enum class Fruit { kApple, kPear, kPlum };

/// The choice table of Fruit (the words of configs, in the order errors list them).
constexpr Choice<Fruit> kFruitWords[] = {{"apple", Fruit::kApple}, {"pear", Fruit::kPear}, {"plum", Fruit::kPlum}};
/// Two words for one value: the first is printed, and only first words are listed.
constexpr Choice<Color> kColorAliasWords[] = {{"red", Color::kRed}, {"blue", Color::kBlue}, {"crimson", Color::kRed}};

struct Basket {
  Basket() { fields().reset(*this); }
  Fruit fruit;
  Color color;

  static const FieldTable<Basket>& fields() {
    static const FieldTable<Basket> table = [] {
      FieldTable<Basket> t("basket");
      t.choice("fruit", &Basket::fruit, kFruitWords, Fruit::kPear, "apple | pear | plum")
          .choice("color", &Basket::color, kColorWords, Color::kRed, "red | blue");
      return t;
    }();
    return table;
  }
};

TEST(CommonConfigFields, ChoiceWordsJoinAsASentence) {
  EXPECT_EQ(choice_words({}), "");
  EXPECT_EQ(choice_words({"a"}), "a");
  EXPECT_EQ(choice_words({"a", "b"}), "a or b");
  EXPECT_EQ(choice_words({"a", "b", "c"}), "a, b or c");
}

TEST(CommonConfigFields, ChoiceRoundTripsEveryValue) {
  for (const auto& c : kFruitWords) {
    EXPECT_EQ(parse_choice("k", c.word, kFruitWords), c.value) << c.word;
    EXPECT_EQ(choice_word(c.value, kFruitWords), c.word);
    // Through the field table: to_kv prints the word, apply parses it back.
    Basket b;
    b.fruit = c.value;
    const KeyValues kv = Basket::fields().to_kv(b);
    EXPECT_EQ(kv.at("fruit"), c.word);
    Basket back;
    back.fruit = c.value == Fruit::kApple ? Fruit::kPlum : Fruit::kApple;  // differs from c.value
    Basket::fields().apply(back, kv, "round trip");
    EXPECT_EQ(back.fruit, c.value) << c.word;
  }
  for (const auto& c : kColorWords) {
    Basket b;
    Basket::fields().apply(b, {{"color", c.word}}, "test");
    EXPECT_EQ(b.color, c.value);
    EXPECT_EQ(Basket::fields().to_kv(b).at("color"), c.word);
  }
  EXPECT_EQ(Basket::fields().find("fruit")->help, "apple | pear | plum");
}

TEST(CommonConfigFields, ChoiceErrorsNameTheKeyTheValueAndTheWords) {
  EXPECT_EQ(error_of([] { parse_choice("finetune.fruit", "Apple", kFruitWords); }),
            "finetune.fruit: expected apple, pear or plum, got 'Apple'");
  EXPECT_EQ(error_of([] { parse_choice("--color", "", kColorWords); }), "--color: expected red or blue, got ''");
  Basket b;
  EXPECT_EQ(error_of([&] {
              Basket::fields().apply(b, {{"fruit", "kiwi"}}, "configs/x.ini [basket]");
            }),
            "configs/x.ini [basket]: key 'fruit': expected apple, pear or plum, got 'kiwi'");
  EXPECT_EQ(error_of([&] {
              Basket::fields().apply(b, {{"color", "green"}}, "--basket.color");
            }),
            "--basket.color: key 'color': expected red or blue, got 'green'");
  EXPECT_EQ(b.fruit, Fruit::kPear);  // a refused word leaves the field as it was
  // Aliases parse, print as the first word, and errors list first words only.
  EXPECT_EQ(parse_choice("k", "crimson", kColorAliasWords), Color::kRed);
  EXPECT_EQ(choice_word(Color::kRed, kColorAliasWords), "red");
  EXPECT_EQ(error_of([] { parse_choice("k", "green", kColorAliasWords); }), "k: expected red or blue, got 'green'");
  EXPECT_EQ(error_of([] { choice_word(static_cast<Fruit>(7), kFruitWords); }),
            "choice table has no word for enum value 7");
}

}  // namespace
}  // namespace tupe
