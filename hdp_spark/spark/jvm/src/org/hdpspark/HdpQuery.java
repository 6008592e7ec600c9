package org.hdpspark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * Stands for "the fingerprint of the query that encloses this {@link HdpCells}" until
 * {@link HdpQueryRule} replaces it, at analysis, with a constant string (see
 * {@link QueryFingerprint}). It also carries the aggregator's group decision:
 *
 * <ul>
 *   <li>{@code none}: a Column or SQL aggregator with no group decision; refused in a grouped
 *       aggregate (publishing the keys found in the data is not a DP output);
 *   <li>{@code public}: the caller declared the grouping values public;
 *   <li>{@code keys:[...]}: a public key list (JSON): only rows with one of these grouping
 *       values are aggregated ({@link KeyFilter});
 *   <li>{@code select:<parameters>}: partition selection ({@code select_keys}): only the
 *       groups a DP selection picks have a row ({@link SelectionPlan});
 *   <li>{@code persons:<parameters>}: a partial-DP Column's privacy unit, global aggregates
 *       only: only the rows of persons with at most {@code max_rows} rows ({@link PersonRows});
 *   <li>{@code cells}: the raw native cells (the release API's native pass, tests): exact
 *       statistics that are not a release, so no decision applies.
 * </ul>
 *
 * <p>Evaluates to null when no analyzer rule replaced it (a session built without the
 * extension's analyzer rule); the Python finalize refuses a null fingerprint.
 */
public final class HdpQuery extends Placeholder {

  private static final long serialVersionUID = 1L;

  static final String NONE = "none";
  static final String PUBLIC = "public";
  static final String CELLS = "cells";

  final String groups;

  /** A local-DP Column's secret bounding key under a privacy unit ({@link HdpSecret}), or
   * null: not a product element, so never printed (see {@link HdpSecret}). */
  final String secret;

  public HdpQuery(String groups) {
    this(groups, null);
  }

  public HdpQuery(String groups, String secret) {
    this.secret = secret;
    if (!NONE.equals(groups) && !PUBLIC.equals(groups) && !CELLS.equals(groups)
        && !groups.startsWith(KeyFilter.PREFIX) && !groups.startsWith(SelectionPlan.PREFIX)
        && !PersonRows.holds(groups) && !LdpUnitPlan.holds(groups)) {
      throw new IllegalArgumentException("hdp_spark: the group decision must be 'none', "
          + "'public', 'cells', a key list, a selection or a privacy unit, got '" + groups
          + "'");
    }
    this.groups = groups;
  }

  @Override
  public DataType dataType() {
    return DataTypes.StringType;
  }

  @Override
  public Object eval(InternalRow input) {
    return null;
  }

  @Override
  public boolean deterministic() {
    return true;
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    if (n == 0) {
      return groups;
    }
    throw new IndexOutOfBoundsException(String.valueOf(n));
  }

  @Override
  public scala.collection.immutable.Seq<Object> otherCopyArgs() {  // makeCopy keeps a key
    return scala.jdk.javaapi.CollectionConverters.asScala(secret == null
        ? new java.util.ArrayList<Object>() : java.util.Arrays.asList((Object) secret)).toSeq();
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof HdpQuery;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof HdpQuery && ((HdpQuery) o).groups.equals(groups)
        && java.util.Objects.equals(((HdpQuery) o).secret, secret);
  }

  @Override
  public int hashCode() {
    return 0x5158 ^ groups.hashCode();
  }

  @Override
  public String prettyName() {
    return "hdp_query";
  }
}
