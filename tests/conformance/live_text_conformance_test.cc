// Store conformance for streamed text (issue 24, LiveTextStore): a call's
// row is put and replaced, read by run within a maximum age, and deleted
// only for its attempt, on every backend of AllBackendsUnderTest().
#include "conformance_fixture.h"

#include <string>
#include <vector>

namespace runloom::conformance {
namespace {

using ::runloom::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::IsEmpty;

class LiveTextConformanceTest : public ConformanceTest {
 protected:
  static LiveTextRow Row(const std::string& run_id, const std::string& path, int attempt,
                         const std::string& text, bool ended = false) {
    return LiveTextRow{.run_id = run_id,
                       .path = path,
                       .attempt = attempt,
                       .writer = "host:1/00ff",
                       .text = text,
                       .ended = ended};
  }
  std::vector<LiveTextRow> List(const std::string& run_id,
                                absl::Duration max_age = absl::Seconds(15)) {
    absl::StatusOr<std::vector<LiveTextRow>> rows = store_->ListLiveText(run_id, max_age);
    EXPECT_OK(rows);
    return rows.ok() ? *rows : std::vector<LiveTextRow>{};
  }
};

TEST_P(LiveTextConformanceTest, APutRowIsReadBackWithEveryFieldAndReplacedAsItGrows) {
  const absl::Time before = Now();
  ASSERT_OK(store_->PutLiveText(Row("run_a", "talk", 1, "Hello")));
  std::vector<LiveTextRow> rows = List("run_a");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].run_id, "run_a");
  EXPECT_EQ(rows[0].path, "talk");
  EXPECT_EQ(rows[0].attempt, 1);
  EXPECT_EQ(rows[0].writer, "host:1/00ff");
  EXPECT_EQ(rows[0].text, "Hello");
  EXPECT_FALSE(rows[0].ended);
  EXPECT_GE(rows[0].updated_at, before);

  // Text with quotes, newlines and multi-byte characters round-trips.
  const std::string more = "Hello, \"world\"\n\u00e9t\u00e9 \u2014 done";
  ASSERT_OK(store_->PutLiveText(Row("run_a", "talk", 1, more, /*ended=*/true)));
  rows = List("run_a");
  ASSERT_EQ(rows.size(), 1u);  // replaced, not added
  EXPECT_EQ(rows[0].text, more);
  EXPECT_TRUE(rows[0].ended);
}

TEST_P(LiveTextConformanceTest, RowsAreReadByRunInPathOrder) {
  ASSERT_OK(store_->PutLiveText(Row("run_a", "triage/turn[2]", 1, "b")));
  ASSERT_OK(store_->PutLiveText(Row("run_a", "draft", 3, "a")));
  ASSERT_OK(store_->PutLiveText(Row("run_b", "draft", 1, "other run")));
  EXPECT_THAT(List("run_a"), ElementsAre(Field(&LiveTextRow::path, "draft"),
                                         Field(&LiveTextRow::path, "triage/turn[2]")));
  EXPECT_THAT(List("run_b"), ElementsAre(Field(&LiveTextRow::text, "other run")));
  EXPECT_THAT(List("run_none"), IsEmpty());
}

TEST_P(LiveTextConformanceTest, ARowOlderThanTheMaximumAgeIsNotRead) {
  ASSERT_OK(store_->PutLiveText(Row("run_a", "old", 1, "left by a writer that stopped")));
  Advance(absl::Seconds(20));
  ASSERT_OK(store_->PutLiveText(Row("run_a", "new", 1, "fresh")));
  EXPECT_THAT(List("run_a", absl::Seconds(15)), ElementsAre(Field(&LiveTextRow::path, "new")));
  EXPECT_THAT(List("run_a", absl::Seconds(30)), ElementsAre(Field(&LiveTextRow::path, "new"),
                                                            Field(&LiveTextRow::path, "old")));
}

TEST_P(LiveTextConformanceTest, DeleteRemovesOnlyTheRowOfThatAttempt) {
  ASSERT_OK(store_->PutLiveText(Row("run_a", "talk", 2, "second attempt")));
  ASSERT_OK(store_->DeleteLiveText("run_a", "talk", 1));  // an older attempt's: kept
  EXPECT_THAT(List("run_a"), ElementsAre(Field(&LiveTextRow::attempt, 2)));
  ASSERT_OK(store_->DeleteLiveText("run_a", "talk", 2));
  EXPECT_THAT(List("run_a"), IsEmpty());
  ASSERT_OK(store_->DeleteLiveText("run_a", "talk", 2));  // none: OK
}

TEST_P(LiveTextConformanceTest, BadRowsAreRefusedAndNothingIsWritten) {
  EXPECT_THAT(store_->PutLiveText(Row("", "talk", 1, "x")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->PutLiveText(Row("run_a", "", 1, "x")),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store_->PutLiveText(Row("run_a", "talk", 1, std::string((1 << 20) + 1, 'x'))),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(List("run_a"), IsEmpty());
  ASSERT_OK(store_->PutLiveText(Row("run_a", "talk", 1, std::string(1 << 20, 'x'))));  // the bound
  EXPECT_EQ(List("run_a").at(0).text.size(), size_t{1} << 20);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Backends, LiveTextConformanceTest,
                         ::testing::ValuesIn(AllBackendsUnderTest()), FactoryName);

}  // namespace runloom::conformance
