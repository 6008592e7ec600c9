package org.hdpspark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * Stands for "the grouping values of the enclosing aggregate" inside {@link HdpCells} until
 * {@link HdpGroupRule} replaces it. Never evaluated: a plan that still holds it fails.
 */
public final class HdpGroup extends Placeholder {

  private static final long serialVersionUID = 1L;



  @Override
  public DataType dataType() {
    return DataTypes.NullType;
  }

  @Override
  public Object eval(InternalRow input) {
    throw new IllegalStateException(
        "hdp_spark: the hdp_spark optimizer rule is not installed on this session; "
        + "build the session with hdp_spark.spark.configure(builder)");
  }




  @Override
  public int productArity() {
    return 0;
  }

  @Override
  public Object productElement(int n) {
    throw new IndexOutOfBoundsException(String.valueOf(n));
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof HdpGroup;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof HdpGroup;
  }

  @Override
  public int hashCode() {
    return 0x4d47;
  }
}
