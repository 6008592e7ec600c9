package org.hdpspark;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.spark.QueryContext;
import org.apache.spark.SparkRuntimeException;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.IntegralType;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The per-user statistics of the user-level mean, per group, in one pass with map-side
 * partial aggregation: per user id (its text, as Spark's cast to string) the row count k,
 * the exact sum of the encoded values, the number of rows with an invalid ε and the least
 * and largest valid ε; the number of rows with a null user id. The per-row expressions are
 * the release API's pass 1 (its children, built by the Python API): the encoded value, the
 * valid ε (null when invalid) and the invalid flag.
 *
 * <p>Children: {@code group} (an {@link HdpGroup} placeholder until {@link HdpGroupRule}),
 * {@code query} (an {@link HdpQuery} placeholder carrying the group decision until
 * {@link HdpQueryRule}), the user column, the encoded value (bigint), the valid ε (double),
 * the invalid flag (bigint), the raw value and ε columns (their types only), the constant
 * rules {@code [EPS_FLOOR, EPS_CAP, lowest grid point or NaN]} and the constant names
 * {@code [value, user, ε]} (for errors).
 *
 * <p>Memory: a group's state holds one entry per distinct user of the group (the id: a boxed
 * long or the string's bytes, and about 100 bytes of map entry and statistics); no public
 * bound exists, as for Spark's {@code collect_set}.
 *
 * <p>Built strict (a release's aggregate), a group whose users break the release API's
 * rules of public inputs (a null user id; an invalid or per-user unequal ε; ε below the
 * grid) fails the query in the release API's words, counting users or rows of the group,
 * never printing a value (see {@link EpsCheck}).
 *
 * <p>Result: struct(group string, user array&lt;string&gt;, k, s, bad array&lt;bigint&gt;,
 * emin, emax array&lt;double&gt; (NaN: no valid ε), null_rows bigint, query string), users in
 * ascending byte order. Privacy: exact, private statistics; they leave Spark only through
 * the finalize that runs the mechanism.
 */
public final class HdpUsers extends HdpAggregate<UserState> {

  private static final long serialVersionUID = 1L;

  public static final String FUNCTION = "hdp_users";

  static final StructType RESULT = new StructType(new StructField[] {
      DataTypes.createStructField("group", DataTypes.StringType, true),
      DataTypes.createStructField("user", DataTypes.createArrayType(DataTypes.StringType, false),
          false),
      DataTypes.createStructField("k", DataTypes.createArrayType(DataTypes.LongType, false), false),
      DataTypes.createStructField("s", DataTypes.createArrayType(DataTypes.LongType, false), false),
      DataTypes.createStructField("bad", DataTypes.createArrayType(DataTypes.LongType, false),
          false),
      DataTypes.createStructField("emin", DataTypes.createArrayType(DataTypes.DoubleType, false),
          false),
      DataTypes.createStructField("emax", DataTypes.createArrayType(DataTypes.DoubleType, false),
          false),
      DataTypes.createStructField("null_rows", DataTypes.LongType, false),
      DataTypes.createStructField("query", DataTypes.StringType, true),
  });

  static final int GROUP = 0;
  static final int QUERY = 1;
  static final int USER = 2;
  static final int Q = 3;
  static final int E = 4;
  static final int BAD = 5;
  static final int VALUE = 6;
  static final int EPS = 7;
  static final int RULES = 8;
  static final int NAMES = 9;
  static final int ARITY = 10;


  public HdpUsers(Seq<Expression> children, int mutableOffset, int inputOffset,
      boolean strict) {
    super(children, mutableOffset, inputOffset, strict);
  }

  private String[] names() {
    ArrayData a = (ArrayData) kids[NAMES].eval(null);
    String[] out = new String[a.numElements()];
    for (int i = 0; i < out.length; i++) {
      out[i] = a.getUTF8String(i).toString();
    }
    return out;
  }

  private double[] rules() {
    ArrayData a = (ArrayData) kids[RULES].eval(null);
    return new double[] {a.getDouble(0), a.getDouble(1), a.getDouble(2)};
  }

  @Override
  public TypeCheckResult checkInputDataTypes() {
    if (kids.length != ARITY || !kids[RULES].foldable() || !kids[NAMES].foldable()) {
      throw new IllegalArgumentException("hdp_users takes (groups, user, encoded value, valid "
          + "eps, invalid flag, value, eps, constant rules, constant names)");
    }
    String[] n = names();
    DataType u = kids[USER].dataType();
    String bad = null;
    if (!(kids[VALUE].dataType() instanceof NumericType)) {
      bad = "value column `" + n[0] + "` must be numeric, got "
          + kids[VALUE].dataType().simpleString() + ".";
    } else if (!(kids[EPS].dataType() instanceof NumericType)) {
      bad = "ε column `" + n[2] + "` must be numeric, got "
          + kids[EPS].dataType().simpleString() + ".";
    } else if (!(u instanceof IntegralType) && !(u instanceof StringType)) {
      bad = "user column `" + n[1] + "` must hold integers or strings, got "
          + u.simpleString() + ".";
    }
    if (bad != null) {  // the release API's words
      throw new IllegalArgumentException("SchemaError: " + bad);
    }
    if (!(kids[QUERY] instanceof HdpQuery) && !(kids[QUERY] instanceof Literal
        && kids[QUERY].dataType() instanceof StringType)) {
      throw new IllegalArgumentException("hdp_users: the query child must be a "
          + "placeholder or the constant fingerprint");
    }
    return TypeCheckResult.TypeCheckSuccess$.MODULE$;
  }

  @Override
  public UserState createAggregationBuffer() {
    return new UserState();
  }

  @Override
  public UserState update(UserState s, InternalRow input) {
    if (!s.grouped) {
      s.group = GroupText.of(kids[GROUP].eval(input), kids[GROUP].dataType());
      s.grouped = true;
    }
    Object id = kids[USER].eval(input);
    if (id == null) {
      s.nullRows++;
      return s;
    }
    // an integral id is kept as a long (its text, Spark's cast to string, is made once per
    // user in eval), a string id as its bytes
    Object key = id instanceof UTF8String ? id : (Object) ((Number) id).longValue();
    Object e = kids[E].eval(input);
    double ev = e == null ? Double.NaN : ((Number) e).doubleValue();
    long q = ((Number) kids[Q].eval(input)).longValue();
    long bad = ((Number) kids[BAD].eval(input)).longValue();
    UserState.User user = s.users.get(key);
    if (user == null) {  // the row's string may be reused by Spark: keep a copy
      user = new UserState.User();
      s.users.put(key instanceof UTF8String ? ((UTF8String) key).copy() : key, user);
    }
    user.add(1, q, bad, ev, ev);
    return s;
  }

  @Override
  public UserState merge(UserState a, UserState b) {
    a.merge(b);
    return a;
  }

  /** The release API's rules of public inputs (Census.check), on one group. */
  private void check(UserState s, List<Map.Entry<UTF8String, UserState.User>> users) {
    String[] n = names();
    boolean grouped = ((StructType) kids[GROUP].dataType()).fields().length > 0;
    String where = grouped ? " of one group" : "";
    String tail = grouped ? " Groups are checked one by one on the executors, so others may "
        + "hold more; the release API (hs.user_mean(df, ..., by=...)) counts every row." : "";
    String msg = null;
    if (s.nullRows > 0) {
      msg = "SchemaError: user column `" + n[1] + "` must not be null; " + s.nullRows
          + " row(s)" + where + " break this rule." + tail;
    } else {
      double[] r = rules();
      long invalid = 0;
      long mixed = 0;
      long below = 0;
      for (Map.Entry<UTF8String, UserState.User> entry : users) {
        UserState.User u = entry.getValue();
        if (u.bad > 0 || Double.isNaN(u.emin)) {
          invalid++;
          continue;
        }
        if (u.emin != u.emax) {
          mixed++;
        }
        double e = u.emin < r[0] ? 0.0 : (u.emin > r[1] && !Double.isInfinite(u.emin))
            ? r[1] : u.emin;
        if (e > 0 && !Double.isInfinite(e) && e < r[2]) {  // false when r[2] is NaN
          below++;
        }
      }
      if (invalid > 0 || mixed > 0) {
        msg = "EpsilonColumnError: Column `" + n[2] + "` must hold one ε >= 0 per user, equal "
            + "on all of the user's rows (user-level privacy); " + invalid + " user(s)" + where
            + " have a null, NaN or negative ε and " + mixed + " user(s) have rows with "
            + "different ε." + tail;
      } else if (below > 0) {
        msg = "EpsilonColumnError: Column `" + n[2] + "` has " + below + " user(s)" + where
            + " with 0 < ε below the lowest point of `eps_grid`; lower `eps_grid.lowest` "
            + "(rounding them up would weaken privacy)." + tail;
      }
    }
    if (msg != null) {
      throw new SparkRuntimeException(EpsCheck.CONDITION,
          new scala.collection.immutable.Map.Map1<>("errorMessage", msg), null,
          new QueryContext[0], "");
    }
  }

  @Override
  public Object eval(UserState s) {
    List<Map.Entry<UTF8String, UserState.User>> users = s.sorted();
    if (strict) {
      check(s, users);
    }
    int n = users.size();
    Object[] user = new Object[n];
    Object[] k = new Object[n];
    Object[] sum = new Object[n];
    Object[] bad = new Object[n];
    Object[] emin = new Object[n];
    Object[] emax = new Object[n];
    for (int i = 0; i < n; i++) {
      UserState.User u = users.get(i).getValue();
      user[i] = users.get(i).getKey();
      k[i] = u.k;
      sum[i] = u.s;
      bad[i] = u.bad;
      emin[i] = u.emin;
      emax[i] = u.emax;
    }
    return new GenericInternalRow(new Object[] {
        s.group == null ? null : UTF8String.fromString(s.group),
        new GenericArrayData(user), new GenericArrayData(k), new GenericArrayData(sum),
        new GenericArrayData(bad), new GenericArrayData(emin), new GenericArrayData(emax),
        s.nullRows, kids[QUERY].eval(null)});
  }

  @Override
  HdpUsers copy(Seq<Expression> children, int mutableOffset, int inputOffset, boolean strict) {
    return new HdpUsers(children, mutableOffset, inputOffset, strict);
  }

  @Override
  int queryIndex() {
    return QUERY;
  }

  @Override
  boolean hasStrict() {
    return true;
  }

  /** This aggregate as a release's: its group's rules of public inputs are checked. */
  @Override
  public HdpUsers strict() {
    return new HdpUsers(children(), mutableOffset, inputOffset, true);
  }

  @Override
  public UserState deserialize(byte[] bytes) {
    return UserState.fromBytes(bytes);
  }

  @Override
  public DataType dataType() {
    return RESULT;
  }

  @Override
  public String prettyName() {
    return FUNCTION;
  }

  /** Builds hdp_users(groups, user, q, e, bad, value, eps, rules, names) with the group and
   * query placeholders first (see {@link HdpExtensions}). */
  static final class Builder extends scala.runtime.AbstractFunction1<Seq<Expression>, Expression>
      implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public Expression apply(Seq<Expression> args) {
      List<Expression> in = new ArrayList<>(CollectionConverters.asJava(args));
      if (in.size() != ARITY - 1) {
        throw new IllegalArgumentException("hdp_users takes (groups, user, encoded value, "
            + "valid eps, invalid flag, value, eps, rules, names)");
      }
      in.set(0, new HdpQuery(HdpQueryRule.constantText(in.get(0), "groups")));
      in.add(GROUP, new HdpGroup());
      return new HdpUsers(HdpCells.seq(in), 0, 0, false);
    }
  }
}
