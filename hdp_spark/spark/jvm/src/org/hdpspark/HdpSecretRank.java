package org.hdpspark;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;

/**
 * The PRF rank that places the one report a local-DP aggregator keeps of a person under a
 * privacy unit ({@link LdpUnitPlan}): {@code rank(report_rank_text(query key, name,
 * person))} of {@code hdp_spark.core.privacy_unit.spec}, i.e. the first 60 bits of SHA-256
 * of {@code <query key> SEP "ldp" SEP <name> SEP <child>} (the child: the person's
 * length-tagged id text), the number the release API's {@code keep_one_report} computes.
 *
 * <p>Privacy: the query key (SHA-256 of the Column's secret bounding key and the query's
 * fingerprint) is held in a field that is not a product element: no printed form of a plan
 * shows it ({@code hdp_ldp_position(child)}), nor JSON; it reaches the executors only inside
 * the serialized task, as the Column finalize's key does inside its pickled function. Not
 * code-generated with the key in the source: the generated code calls {@link #eval} through
 * a reference object. Equality reads the key, the hash code does not.
 */
final class HdpSecretRank extends Expression implements CodegenFallback, java.io.Serializable {

  private static final long serialVersionUID = 1L;

  /** The SQL function of the release API's rank on Spark Connect: {@code hdp_ldp_rank(tagged
   * person text, 'aggregator name', <secret>)}, the secret an {@link HdpSecret} that only
   * {@link HdpConnectSecret} (or py4j) builds, never a literal. */
  static final String FUNCTION = "hdp_ldp_rank";

  private final Expression child;
  private final byte[] prefix;

  public HdpSecretRank(Expression child, byte[] prefix) {
    this.child = child;
    this.prefix = prefix.clone();
  }

  /** The rank of a person's tagged text under query key {@code key} and aggregator
   * {@code name}. */
  static HdpSecretRank of(Expression tagged, String key, String name) {
    return new HdpSecretRank(tagged, prefix(key, name));
  }

  /** The bytes before the person's text in the rank's text under {@code key} and
   * aggregator {@code name}: {@code <key> SEP "ldp" SEP <name> SEP}. */
  static byte[] prefix(String key, String name) {
    String sep = "\u001f";
    return (key + sep + "ldp" + sep + name + sep).getBytes(StandardCharsets.UTF_8);
  }

  /** A SHA-256 digest (one per task or evaluation: a digest is not thread-safe). */
  static MessageDigest digest() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The rank of the person's length-tagged text {@code tagged} after {@code prefix}: the
   * first 60 bits of SHA-256 (the first 15 hex digits), as a long. */
  static long rank(MessageDigest md, byte[] prefix, byte[] tagged) {
    md.update(prefix);
    byte[] d = md.digest(tagged);
    long head = 0L;
    for (int i = 0; i < 8; i++) {
      head = (head << 8) | (d[i] & 0xffL);
    }
    return head >>> 4;  // the first 15 hex digits
  }

  /** Builds {@code hdp_ldp_rank(tagged, name, secret)}: the key moves from the secret
   * argument into the rank's non-printed field; a literal key is refused (it would be in the
   * plan). */
  static final class Builder extends scala.runtime.AbstractFunction1<Seq<Expression>, Expression>
      implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public Expression apply(Seq<Expression> args) {
      java.util.List<Expression> in = scala.jdk.javaapi.CollectionConverters.asJava(args);
      if (in.size() != 3 || !(in.get(2) instanceof HdpSecret)
          || !(in.get(1).foldable() && in.get(1).dataType() instanceof
              org.apache.spark.sql.types.StringType && in.get(1).eval(null) != null)
          || !(in.get(0).dataType() instanceof org.apache.spark.sql.types.StringType)) {
        throw new IllegalArgumentException("hdp_ldp_rank takes (tagged person text, constant "
            + "aggregator name, secret key), the key built by hdp_spark, never a literal");
      }
      return of(in.get(0), ((HdpSecret) in.get(2)).material(),
          in.get(1).eval(null).toString());
    }
  }

  @Override
  public Seq<Expression> children() {
    return HdpCells.seq(Arrays.asList(child));
  }

  @Override
  public boolean nullable() {
    return true;
  }

  @Override
  public DataType dataType() {
    return DataTypes.LongType;
  }

  @Override
  public Object eval(InternalRow input) {
    Object v = child.eval(input);
    if (v == null) {
      return null;
    }
    return rank(digest(), prefix, ((UTF8String) v).getBytes());
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    return CodegenFallback.super.doGenCode(ctx, ev);
  }

  @Override
  public Expression withNewChildrenInternal(
      scala.collection.immutable.IndexedSeq<Expression> newChildren) {
    return new HdpSecretRank(newChildren.apply(0), prefix);
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    if (n == 0) {
      return child;
    }
    throw new IndexOutOfBoundsException(String.valueOf(n));
  }

  @Override
  public Seq<Object> otherCopyArgs() {  // makeCopy/clone keep the key
    return scala.jdk.javaapi.CollectionConverters.asScala(
        Arrays.asList((Object) prefix)).toSeq();
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof HdpSecretRank;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof HdpSecretRank && ((HdpSecretRank) o).child.equals(child)
        && Arrays.equals(((HdpSecretRank) o).prefix, prefix);
  }

  @Override
  public int hashCode() {
    return 0x5ec8 ^ child.hashCode();
  }

  @Override
  public String prettyName() {
    return "hdp_ldp_position";
  }

  @Override
  public String toString() {
    return "hdp_ldp_position(" + child + ")";
  }

  @Override
  public String sql() {
    return "hdp_ldp_position(" + child.sql() + ")";
  }
}
