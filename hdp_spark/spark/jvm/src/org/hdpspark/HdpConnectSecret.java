package org.hdpspark;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Optional;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.ExpressionPlugin;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.BytesValue;
import org.sparkproject.connect.protobuf.InvalidProtocolBufferException;

/**
 * The Spark Connect channel of {@link HdpSecret}: an expression extension (configured by
 * {@code hdp_spark.spark.configure} as {@code spark.connect.extensions.expression.classes})
 * that turns a {@code google.protobuf.BytesValue} starting with {@link #MAGIC} into the
 * secret argument of a local-DP Column under a privacy unit, so the key is never a literal of
 * the Catalyst plan.
 *
 * <p>Privacy: the key travels in the request's bytes, as the Column finalize's key travels in
 * its pickled function; Connect's statement text (the Connect UI tab, the event log) prints a
 * bytes field abbreviated to its first bytes, which are the public {@link #MAGIC} (a test
 * greps the event log for the key).
 */
public final class HdpConnectSecret implements ExpressionPlugin {

  static final byte[] MAGIC = "hdp_spark/secret/v1\u0000".getBytes(StandardCharsets.UTF_8);

  /** The head of a SQL registration's key ({@code register_sql} on Connect): the plugin gives
   * it to the session's local-DP SQL functions ({@link HdpExtensions#registerLdpUnitKey})
   * and stands for the constant {@code true}. Same length as {@link #MAGIC}. */
  static final byte[] SQL_KEY = "hdp_spark/sqlkey/v1\u0000".getBytes(StandardCharsets.UTF_8);

  private static boolean starts(byte[] v, byte[] head) {
    return v.length > head.length
        && Arrays.equals(Arrays.copyOfRange(v, 0, head.length), head);
  }

  @Override
  public Optional<Expression> transform(byte[] relation, SparkConnectPlanner planner) {
    Any any;
    try {
      any = Any.parseFrom(relation);
    } catch (InvalidProtocolBufferException e) {
      return Optional.empty();
    }
    if (!any.is(BytesValue.class)) {
      return Optional.empty();
    }
    byte[] v;
    try {
      v = any.unpack(BytesValue.class).getValue().toByteArray();
    } catch (InvalidProtocolBufferException e) {
      return Optional.empty();
    }
    if (starts(v, SQL_KEY)) {
      HdpExtensions.registerLdpUnitKey(planner.session(), new String(v, SQL_KEY.length,
          v.length - SQL_KEY.length, StandardCharsets.US_ASCII));
      return Optional.of(org.apache.spark.sql.catalyst.expressions.Literal.create(true,
          org.apache.spark.sql.types.DataTypes.BooleanType));
    }
    if (!starts(v, MAGIC)) {
      return Optional.empty();
    }
    return Optional.of(new HdpSecret(new String(v, MAGIC.length, v.length - MAGIC.length,
        StandardCharsets.US_ASCII)));
  }
}
