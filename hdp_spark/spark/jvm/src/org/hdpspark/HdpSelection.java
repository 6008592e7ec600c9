package org.hdpspark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * Stands for a value of a grouped aggregate's partition selection inside a Column
 * aggregator's finalize until {@link SelectionPlan} replaces it, at analysis: {@code weight}
 * (the group's noisy selection weight W&#771; in steps, a DP value computed once per group by the
 * selection's finalize) or {@code parts} (how many hdp_spark aggregators of the aggregate
 * share the statistics' budget). Never evaluated: a plan that still holds it fails.
 */
public final class HdpSelection extends Placeholder {

  private static final long serialVersionUID = 1L;

  static final String FUNCTION = "hdp_selection";
  static final String WEIGHT = "weight";
  static final String PARTS = "parts";

  final String what;

  public HdpSelection(String what) {
    if (!WEIGHT.equals(what) && !PARTS.equals(what)) {
      throw new IllegalArgumentException("hdp_spark: hdp_selection takes 'weight' or 'parts', "
          + "got '" + what + "'");
    }
    this.what = what;
  }

  @Override
  public DataType dataType() {
    return WEIGHT.equals(what) ? DataTypes.LongType : DataTypes.IntegerType;
  }

  @Override
  public Object eval(InternalRow input) {
    throw new IllegalStateException(HdpSelected.NO_RULE);
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    if (n == 0) {
      return what;
    }
    throw new IndexOutOfBoundsException(String.valueOf(n));
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof HdpSelection;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof HdpSelection && ((HdpSelection) o).what.equals(what);
  }

  @Override
  public int hashCode() {
    return 0x5345 ^ what.hashCode();
  }

  @Override
  public String prettyName() {
    return FUNCTION;
  }
}
