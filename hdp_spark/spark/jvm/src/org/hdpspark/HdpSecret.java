package org.hdpspark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

import scala.collection.immutable.Seq;

/**
 * A secret argument of {@code hdp_ldp_cells}: a local-DP Column's bounding key under a
 * privacy unit (64 hex digits), which the function's builder moves into its {@link HdpQuery}
 * placeholder ({@link HdpLdpCells.Builder}). Built by the Python API directly (classic: py4j;
 * Connect: {@link HdpConnectSecret}), never from a plan literal.
 *
 * <p>Privacy: the key is a field that is not a product element, so no printed form of a
 * plan (explain in every mode, the Spark UI, event logs, plan-change logs, JSON) shows it:
 * the node prints as {@code hdp_secret()}. Equality reads it (two Columns with different keys
 * are different expressions), the hash code does not. {@link QueryFingerprint} writes a
 * node's product elements only, so the fingerprint does not depend on it.
 */
public final class HdpSecret extends Placeholder {

  private static final long serialVersionUID = 1L;

  private final String material;

  public HdpSecret(String material) {
    if (material == null || !material.matches("[0-9a-f]{64}")) {
      throw new IllegalArgumentException("hdp_spark: a secret argument must be 64 hex digits");
    }
    this.material = material;
  }

  String material() {
    return material;
  }

  /** The Column of this secret (classic PySpark builds it through py4j). */
  public static org.apache.spark.sql.Column column(String material) {
    return org.apache.spark.sql.classic.ExpressionUtils.column(new HdpSecret(material));
  }

  /**
   * The release API's one-report rank (classic PySpark builds it through py4j): {@code
   * rank(report_rank_text(key, name, person))} of a person's length-tagged id text under the
   * release's bounding key, held in a field no printed plan shows ({@link HdpSecretRank}),
   * never a plan literal.
   */
  public static org.apache.spark.sql.Column rank(
      org.apache.spark.sql.Column tagged, String key, String name) {
    if (key == null || !key.matches("[0-9a-f]{64}")) {
      throw new IllegalArgumentException("hdp_spark: a secret argument must be 64 hex digits");
    }
    return org.apache.spark.sql.classic.ExpressionUtils.column(HdpSecretRank.of(
        org.apache.spark.sql.classic.ExpressionUtils.expression(tagged), key, name));
  }

  @Override
  public DataType dataType() {
    return DataTypes.StringType;
  }

  @Override
  public Object eval(InternalRow input) {
    throw new IllegalStateException("hdp_spark: a secret argument is never evaluated");
  }

  @Override
  public boolean deterministic() {
    return true;
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
  public Seq<Object> otherCopyArgs() {  // makeCopy/clone keep the key
    return scala.jdk.javaapi.CollectionConverters.asScala(
        java.util.Arrays.asList((Object) material)).toSeq();
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof HdpSecret;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof HdpSecret && ((HdpSecret) o).material.equals(material);
  }

  @Override
  public int hashCode() {
    return 0x5ec7;
  }

  @Override
  public String prettyName() {
    return "hdp_secret";
  }

  @Override
  public String toString() {
    return "hdp_secret()";
  }

  @Override
  public String sql() {
    return "hdp_secret()";
  }
}
