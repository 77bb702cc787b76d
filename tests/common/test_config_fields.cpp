// Table-driven config structs (common/config_fields.h): value parsing (integers written by
// people: 1e6, 1_000_000), the shortest round-trip double text, and FieldTable's apply /
// to_kv with errors naming the place and the key, and enum choice fields (word <-> value).
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
  for (const char* bad : {"", "inf", "-inf", "nan", "1e400", "1,5", "0.1 "})
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

struct Sample {
  int64_t steps = 10;  ///< an integer field
  double lr = 1e-4;    ///< a real field
  bool shuffle = true;
  std::string name = "tiny";
  Color color = Color::kRed;

  static const FieldTable<Sample>& fields() {
    static const FieldTable<Sample> table = [] {
      FieldTable<Sample> t;
      t.integer("steps", &Sample::steps, "optimizer steps")
          .real("lr", &Sample::lr, "peak learning rate")
          .boolean("shuffle", &Sample::shuffle, "shuffle the data")
          .text("name", &Sample::name, "run name")
          .custom(
              "color", "red | blue",
              [](const Sample& s) { return std::string(s.color == Color::kRed ? "red" : "blue"); },
              [](Sample& s, const std::string& v) {
                TUPE_CHECK(v == "red" || v == "blue", "key 'color': expected red or blue, got '" << v << "'");
                s.color = v == "red" ? Color::kRed : Color::kBlue;
              });
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

TEST(CommonConfigFields, ErrorsNameThePlaceAndTheKey) {
  Sample s;
  EXPECT_EQ(error_of([&] {
              Sample::fields().apply(s, {{"stepz", "1"}}, "configs/tiny.ini [train]");
            }),
            "configs/tiny.ini [train]: unknown key 'stepz'");
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
constexpr Choice<Color> kColorWords[] = {{"red", Color::kRed}, {"blue", Color::kBlue}};

struct Basket {
  Fruit fruit = Fruit::kPear;
  Color color = Color::kRed;

  static const FieldTable<Basket>& fields() {
    static const FieldTable<Basket> table = [] {
      FieldTable<Basket> t;
      t.choice("fruit", &Basket::fruit, kFruitWords, "apple | pear | plum")
          .choice("color", &Basket::color, kColorWords, "red | blue");
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
  EXPECT_EQ(error_of([] { choice_word(static_cast<Fruit>(7), kFruitWords); }),
            "choice table has no word for enum value 7");
}

}  // namespace
}  // namespace tupe
