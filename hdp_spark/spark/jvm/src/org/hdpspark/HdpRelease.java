package org.hdpspark;

import org.apache.spark.sql.catalyst.expressions.Expression;

/**
 * A native aggregate of hdp_spark that {@link HdpQueryRule} fingerprints and checks: it holds
 * an {@link HdpQuery} placeholder carrying its group decision ({@link HdpCells} for the mean
 * and histogram, {@link HdpRecords} for the heavy hitters, {@link HdpLdpCells} for the
 * local-DP aggregators).
 */
interface HdpRelease {

  /** The aggregator's group decision while the query placeholder is in place (else null). */
  String groups();

  /** This aggregate as a release's: the form that refuses, at run time, only what the
   * release API refuses on public inputs (itself when nothing changes). */
  Expression strict();
}
