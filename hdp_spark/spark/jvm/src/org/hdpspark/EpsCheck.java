package org.hdpspark;

import org.apache.spark.QueryContext;
import org.apache.spark.SparkRuntimeException;

/**
 * The ε rules of a release's aggregate ({@link HdpCells} built strict: the Column and SQL
 * aggregators), checked when a group's cells are final: a row with an ε no release can
 * honour (null, NaN, negative, -inf; or 0 < ε below the lowest point of an {@code eps_grid})
 * fails the query with one short error in the release API's words and class name
 * ({@code EpsilonColumnError: ...}), as Spark's {@code raise_error} does (error condition
 * {@code USER_RAISED_EXCEPTION}: PySpark raises it as a one-line
 * {@code SparkRuntimeException}, on classic and Connect), never a Python worker traceback.
 *
 * <p>It counts rows, never values. A global aggregate's count is the table's; a grouped
 * aggregate checks each group on its own, on the executors, so its count is the first
 * failing group's (the message says so): a total would take another pass over the data.
 */
final class EpsCheck {

  private EpsCheck() {}

  static final String CONDITION = "USER_RAISED_EXCEPTION";

  static void check(CellState s, double invalid, double belowGrid, String eps,
      boolean grouped) {
    long bad = 0;
    long below = 0;
    int w = s.k + 1;
    for (int c = 0; c < s.size; c++) {
      if (s.level[c] == invalid) {
        bad += s.acc[c * w];
      } else if (s.level[c] == belowGrid) {
        below += s.acc[c * w];
      }
    }
    if (bad == 0 && below == 0) {
      return;
    }
    String where = grouped ? " of one group" : "";
    String tail = grouped ? " Groups are checked one by one on the executors, so others may "
        + "hold more; the release API (hs.agg(df, ..., by=...)) counts every row." : "";
    String msg = bad > 0
        ? "EpsilonColumnError: Column `" + eps + "` must hold ε >= 0 or +inf (not null, NaN, "
            + "negative or -inf); " + bad + " row(s)" + where + " break this rule." + tail
        : "EpsilonColumnError: Column `" + eps + "` has " + below + " row(s)" + where
            + " with 0 < ε below the lowest point of `eps_grid`; lower `eps_grid.lowest` "
            + "(rounding them up would weaken privacy)." + tail;
    throw new SparkRuntimeException(CONDITION,
        new scala.collection.immutable.Map.Map1<>("errorMessage", msg), null,
        new QueryContext[0], "");
  }
}
