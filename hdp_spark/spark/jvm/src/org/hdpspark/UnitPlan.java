package org.hdpspark;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Function;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Ascending$;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Coalesce;
import org.apache.spark.sql.catalyst.expressions.Concat;
import org.apache.spark.sql.catalyst.expressions.ConcatWs;
import org.apache.spark.sql.catalyst.expressions.Conv;
import org.apache.spark.sql.catalyst.expressions.CurrentRow$;
import org.apache.spark.sql.catalyst.expressions.DenseRank;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.If;
import org.apache.spark.sql.catalyst.expressions.IsNaN;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.Length;
import org.apache.spark.sql.catalyst.expressions.LessThan;
import org.apache.spark.sql.catalyst.expressions.LessThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.Not;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.catalyst.expressions.Rank;
import org.apache.spark.sql.catalyst.expressions.RowFrame$;
import org.apache.spark.sql.catalyst.expressions.RowNumber;
import org.apache.spark.sql.catalyst.expressions.Sha2;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.expressions.SortOrder$;
import org.apache.spark.sql.catalyst.expressions.SpecifiedWindowFrame;
import org.apache.spark.sql.catalyst.expressions.Subtract;
import org.apache.spark.sql.catalyst.expressions.Substring;
import org.apache.spark.sql.catalyst.expressions.UnboundedFollowing$;
import org.apache.spark.sql.catalyst.expressions.UnboundedPreceding$;
import org.apache.spark.sql.catalyst.expressions.WindowExpression;
import org.apache.spark.sql.catalyst.expressions.WindowSpecDefinition;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.Min;
import org.apache.spark.sql.catalyst.plans.LeftOuter$;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.BROADCAST$;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.HintInfo;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.JoinHint$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.RepartitionByExpression;
import org.apache.spark.sql.catalyst.plans.logical.ResolvedHint;
import org.apache.spark.sql.catalyst.plans.logical.Window;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * The privacy unit of a Column or SQL aggregate (group decision {@code select:{...,"unit":
 * column, "max_groups": G, "max_rows": R, "keys_public": true}#<bounding key>}): the release
 * API's bounding rule ({@code hdp_spark.core.privacy_unit.spec}; on Spark
 * {@code hdp_spark.spark.privacy_unit.bound_rows}) inserted below the aggregate: as the
 * release API's streaming operator ({@link UnitBoundPlan}: one shuffle by the id, one sort,
 * the node {@code HdpUnitBound}), unless the session sets {@code hdp_spark.unitOperator} to
 * false; then (the fallback, the same rows) in native expressions and windows:
 *
 * <pre>
 *   Project   [the input's columns, ε_person]
 *   Filter    [inside the keys, group position <= G, row position <= R]
 *   Window    [ε_person = min(safe ε) over the person]
 *   Window    [dense_rank, rank over (person; group rank, group)]
 *   Window    [row_number over (person; group rank, group, row rank, codes)]
 *   Project   [person text, group position, safe ε, codes, group rank, row rank]
 *   Repartition [by the id column]
 *   Filter    [person not null]
 *   (grouped: the input joined with the public groups' positions: each group's place among
 *    the groups found, in ascending order, the release API's key order of the same keys;
 *    -1 for a row of a null or NaN key, which counts for its person's ε only)
 * </pre>
 *
 * <p>The rows are repartitioned by the id column itself and the texts and ranks computed
 * after that shuffle (they never cross it); the windows share that partitioning and prefixes
 * of one order, stacked longest order first, so the step costs one shuffle and one sort. The
 * ranks are SHA-256 of texts starting with the query's bounding key: SHA-256 of (the
 * Column's bounding key, the query's fingerprint), as
 * {@code hdp_spark.core.privacy_unit.spec.query_bounding_key} computes it for the query's
 * release key (not a secret: it orders rows, keys no noise; a literal of the plan on this
 * fallback, held by the node on the operator's path). The
 * aggregate's ε column then reads ε_person. Privacy: the rule's argument
 * ({@code spec.py}): each person's kept rows and ε are functions of their own rows, the key
 * and the public parameters only.
 */
final class UnitPlan {

  private UnitPlan() {}

  private static final String SEP = "\u001f";
  private static final int BKEY = 64;

  static final String TYPE = "ParameterError: `privacy_unit` column '%s' must hold integers "
      + "or strings, got type %s.";
  static final String MISSING = "ParameterError: `privacy_unit` names column '%s', which the "
      + "aggregated table does not have.";

  static final String READ = "ParameterError: `privacy_unit` column '%s' identifies people: "
      + "no aggregator may read it as data and the aggregate may not group by it.";

  /** Whether a group decision carries a privacy unit. */
  static boolean holds(String groups) {
    return groups.startsWith(SelectionPlan.PREFIX) && bkey(groups) != null;
  }

  /** The decision without its bounding key (what two aggregators must share). */
  static String decision(String groups) {
    return bkey(groups) == null ? groups : groups.substring(0, groups.length() - BKEY - 1);
  }

  private static String bkey(String groups) {
    int at = groups.length() - BKEY - 1;
    return at > 0 && groups.charAt(at) == '#' ? groups.substring(at + 1) : null;
  }

  /** SHA-256 hex of (the Column's bounding key, "query", the fingerprint). */
  static String queryKey(String bkey, String fp) {
    try {
      byte[] d = MessageDigest.getInstance("SHA-256").digest(
          (bkey + SEP + "query" + SEP + fp).getBytes(StandardCharsets.UTF_8));
      StringBuilder out = new StringBuilder();
      for (byte b : d) {
        out.append(String.format("%02x", b));
      }
      return out.toString();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The aggregate's input bounded by the unit, and {@code outs} reading ε_person. */
  static LogicalPlan build(Aggregate a, List<NamedExpression> outs, LogicalPlan base,
      LogicalPlan keyed, String groups, String fp) {
    JsonNode p;
    try {
      p = new ObjectMapper().readTree(decision(groups).substring(SelectionPlan.PREFIX.length()));
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("hdp_spark: a malformed group decision", e);
    }
    String column = p.get("unit").asText();
    int maxGroups = p.get("max_groups").asInt();
    int maxRows = p.get("max_rows").asInt();
    String key = queryKey(bkey(groups), fp);
    List<HdpCells> cells = new ArrayList<>();
    for (NamedExpression e : outs) {
      collect((Expression) e, cells);
    }
    Expression eps = CollectionConverters.asJava(cells.get(0).children()).get(0);
    List<Attribute> input = CollectionConverters.asJava(base.output());
    Attribute person = find(input, column);
    Expression text = UnitKeys.textOf(person);
    if (text == null) {
      throw new IllegalArgumentException(String.format(TYPE, column,
          person.dataType().simpleString()));
    }
    List<Expression> grouping = CollectionConverters.asJava(a.groupingExpressions());
    List<Expression> reads = new ArrayList<>(grouping);
    for (HdpCells c : cells) {
      List<Expression> kids = CollectionConverters.asJava(c.children());
      reads.add(kids.get(1));
      for (int j = HdpCells.VALUES; j < kids.size(); j += 4) {
        reads.add(kids.get(j));
      }
    }
    for (Expression r : reads) {
      if (r.references().contains(person)) {
        throw new IllegalArgumentException(String.format(READ, column));
      }
    }
    JsonNode listed = p.get("keys");
    boolean select = !p.path("keys_public").asBoolean(true);  // select_keys under the unit
    if (listed != null && grouping.isEmpty()) {
      throw new IllegalArgumentException(HdpQueryRule.KEYS_GLOBAL);
    }
    if (select && grouping.isEmpty()) {
      throw new IllegalArgumentException(SelectionPlan.GLOBAL);
    }
    if (!grouping.isEmpty() && listed == null && !select
        && !p.path("public").asBoolean(false)) {
      throw new IllegalArgumentException(HdpQueryRule.UNDECIDED);
    }
    List<Expression> codeList = new ArrayList<>();
    for (HdpCells c : cells) {
      codeList.add(code(c));
    }
    // The streaming operator (UnitBoundPlan; else the windows below, the same rows).
    // Privacy: its output is a per-person function of the person's own rows, the query's
    // bounding key and the public bounds (one person at a time; UnitBound's comment); the
    // positions it reads come from public keys (a list, the declared-public groups found)
    // or the row's own key text, as on the native path.
    if (UnitBoundPlan.enabled()) {
      List<List<Literal>> listedKeys = !select && listed != null
          ? UnitKeys.literals(listed, grouping) : null;
      Function<LogicalPlan, Object[]> position = null;
      if (select) {
        position = rows -> new Object[] {rows, UnitKeys.keyText(grouping)};
      } else if (listedKeys != null) {
        position = rows -> new Object[] {rows, UnitKeys.position(grouping, listedKeys)};
      } else if (!grouping.isEmpty()) {
        position = rows -> {
          Attribute[] at = {null};
          return new Object[] {positioned(rows, keyed, grouping, at), at[0]};
        };
      }
      LogicalPlan streamed = UnitBoundPlan.build(base, person, read(a, outs), position, eps,
          codeList, maxGroups, maxRows, key);
      if (streamed != null) {
        List<Attribute> out = CollectionConverters.asJava(streamed.output());
        return finish(a, outs, streamed, out.get(out.size() - 1), input, grouping, listedKeys,
            select, keyed);
      }
    }
    LogicalPlan framed = base;
    Expression group = Literal.create(0L, DataTypes.LongType);
    List<List<Literal>> keys = null;
    if (select) {  // the group's canonical text (null when a value is null: outside)
      group = UnitKeys.keyText(grouping);
    } else if (listed != null) {  // a public key list: the position is the key's index in it
      keys = UnitKeys.literals(listed, grouping);
      Alias pos = SelectionPlan.alias(UnitKeys.position(grouping, keys), "__pu_pos");
      List<NamedExpression> cols = new ArrayList<>(CollectionConverters.asJava(base.output()));
      cols.add(pos);
      framed = new Project(seq(cols), base);
      group = pos.toAttribute();
    } else if (!grouping.isEmpty()) {
      Attribute[] position = {null};
      framed = positioned(base, keyed, grouping, position);
      group = position[0];
    }
    // per row: person, group, safe ε, codes, ranks (bound_rows' columns)
    Alias personA = SelectionPlan.alias(text, "__pu_person");
    Alias groupA = SelectionPlan.alias(group, "__pu_group");
    // rows outside the public keys (a null or NaN key) sort last and take no group
    // position; they count for their person's ε only (bound_rows' rule)
    Alias outsideA = SelectionPlan.alias(select ? new IsNull(group) : new LessThan(group,
        Literal.create(0L, DataTypes.LongType)), "__pu_outside");
    Expression e = cast(eps, DataTypes.DoubleType);
    Expression bad = new Or(new Or(new IsNull(e), new IsNaN(e)),
        new LessThan(e, Literal.create(0.0, DataTypes.DoubleType)));
    Alias epsA = SelectionPlan.alias(new If(bad, Literal.create(0.0, DataTypes.DoubleType), e),
        "__pu_eps");
    List<Expression> codeTexts = new ArrayList<>();
    codeTexts.add(lit(","));
    for (Expression c : codeList) {
      codeTexts.add(cast(c, DataTypes.StringType));
    }
    Expression codes = cells.isEmpty() ? lit("") : new ConcatWs(seq(codeTexts));
    Alias codesA = SelectionPlan.alias(codes, "__pu_codes");
    Expression tagged = new Concat(seq(Arrays.asList(
        cast(new Length(text), DataTypes.StringType), lit(":"), text)));
    Expression groupText = select ? group : cast(group, DataTypes.StringType);
    Alias grankA = SelectionPlan.alias(rank(Arrays.asList(lit(key), lit("g"), tagged,
        groupText)), "__pu_grank");
    Alias rrankA = SelectionPlan.alias(rank(Arrays.asList(lit(key), lit("r"), tagged,
        groupText, codes)), "__pu_rrank");
    List<NamedExpression> cols = new ArrayList<>(CollectionConverters.asJava(framed.output()));
    cols.addAll(Arrays.asList(personA, groupA, outsideA, epsA, codesA, grankA, rrankA));
    // shuffled by the id itself: the texts and ranks are computed after the shuffle
    LogicalPlan ranked = new Project(seq(cols), new RepartitionByExpression(
        seq(Arrays.asList((Expression) person)), new Filter(new IsNotNull(person), framed),
        Option.empty(), Option.empty()));
    List<Expression> by = Arrays.asList(person);
    List<Expression> groupOrder = Arrays.asList(outsideA.toAttribute(), grankA.toAttribute(),
        groupA.toAttribute());
    List<Expression> rowOrder = new ArrayList<>(groupOrder);
    rowOrder.add(rrankA.toAttribute());
    rowOrder.add(codesA.toAttribute());
    // longest order first: the windows above reuse its sort
    Alias rn = window(new RowNumber(), by, rowOrder, true, "__pu_rn");
    LogicalPlan w = new Window(seq(Arrays.asList((NamedExpression) rn)), seq(by),
        orders(rowOrder), ranked, Option.empty());
    Alias gpos = window(new DenseRank(seq(groupOrder)), by, groupOrder, true, "__pu_gpos");
    Alias rk = window(new Rank(seq(groupOrder)), by, groupOrder, true, "__pu_rk");
    w = new Window(seq(Arrays.asList((NamedExpression) gpos, rk)), seq(by), orders(groupOrder),
        w, Option.empty());
    Alias pe = window(new Min(epsA.toAttribute()).toAggregateExpression(), by,
        new ArrayList<>(), false, "__pu_person_eps");
    w = new Window(seq(Arrays.asList((NamedExpression) pe)), seq(by), orders(new ArrayList<>()),
        w, Option.empty());
    Expression rowPos = new Subtract(rn.toAttribute(), new Subtract(rk.toAttribute(),
        Literal.create(1, DataTypes.IntegerType), Subtract.apply$default$3()),
        Subtract.apply$default$3());
    Expression keep = new And(new And(new Not(outsideA.toAttribute()),
        new LessThanOrEqual(gpos.toAttribute(), Literal.create(maxGroups, DataTypes.IntegerType))),
        new LessThanOrEqual(rowPos, Literal.create(maxRows, DataTypes.IntegerType)));
    List<NamedExpression> kept = new ArrayList<>(input);
    kept.add(pe.toAttribute());
    return finish(a, outs, new Project(seq(kept), new Filter(keep, w)), pe.toAttribute(),
        input, grouping, keys, select, keyed);
  }

  /** The aggregate over the bounded rows ({@code bounded}: the input's columns, then
   * ε_person), its cells reading {@code personEps}; every listed key or public group found
   * given a row. */
  private static LogicalPlan finish(Aggregate a, List<NamedExpression> outs,
      LogicalPlan bounded, Attribute personEps, List<Attribute> input,
      List<Expression> grouping, List<List<Literal>> keys, boolean select, LogicalPlan keyed) {
    if (keys != null) {  // every listed key has a row: one at ε 0 per key (weight 0)
      bounded = UnitKeys.withEveryKey(bounded, input, grouping, keys);
    } else if (!select && !grouping.isEmpty()) {  // 'public': every group found has a row
      bounded = UnitKeys.withEveryGroup(bounded, input, grouping, keyed);
    }
    List<NamedExpression> reading = reading(outs, personEps);
    return SelectionPlan.build(a, reading, bounded, !select);
  }

  /** {@code outs} with each aggregator's ε replaced by {@code eps}. */
  private static List<NamedExpression> reading(List<NamedExpression> outs, Expression eps) {
    List<NamedExpression> reading = new ArrayList<>();
    for (NamedExpression o : outs) {
      reading.add((NamedExpression) ((Expression) o).transformUp(
          new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression x) {
              return x instanceof HdpCells;
            }

            @Override
            public Expression apply(Expression x) {
              List<Expression> kids = new ArrayList<>(
                  CollectionConverters.asJava(x.children()));
              kids.set(0, eps);
              return x.withNewChildren(seq(kids));
            }
          }));
    }
    return reading;
  }

  /** The input columns the aggregate reads above the bounding: its grouping and its
   * outputs' (each aggregator's ε column aside: they read ε_person). */
  private static AttributeSet read(Aggregate a, List<NamedExpression> outs) {
    AttributeSet read = AttributeSet.apply(seq(new ArrayList<Expression>()));
    for (Expression g : CollectionConverters.asJava(a.groupingExpressions())) {
      read = read.$plus$plus(g.references());
    }
    for (NamedExpression o : reading(outs, Literal.create(0.0, DataTypes.DoubleType))) {
      read = read.$plus$plus(((Expression) o).references());
    }
    return read;
  }

  /** {@code base} joined with each group's position among the groups found in
   * {@code keyed} (its rows without a null or NaN key: 0, 1, ... in ascending key order;
   * -1 for a row outside them): the distinct keys, numbered, broadcast. */
  private static LogicalPlan positioned(LogicalPlan base, LogicalPlan keyed,
      List<Expression> grouping, Attribute[] position) {
    List<NamedExpression> keys = new ArrayList<>();
    for (int i = 0; i < grouping.size(); i++) {
      keys.add(SelectionPlan.alias(grouping.get(i), "__pu_k" + i));
    }
    LogicalPlan distinct = new Aggregate(seq(grouping), seq(keys), keyed, Option.empty());
    List<Expression> order = new ArrayList<>();
    for (NamedExpression k : keys) {
      order.add(k.toAttribute());
    }
    Alias number = window(new RowNumber(), new ArrayList<>(), order, true, "__pu_g");
    LogicalPlan numbered = new Window(seq(Arrays.asList((NamedExpression) number)),
        seq(new ArrayList<Expression>()), orders(order), distinct, Option.empty());
    Expression on = null;
    for (int i = 0; i < grouping.size(); i++) {
      Expression eq = new EqualTo(grouping.get(i), order.get(i));
      on = on == null ? eq : new And(on, eq);
    }
    LogicalPlan small = new ResolvedHint(numbered,
        new HintInfo(Option.apply(BROADCAST$.MODULE$)));
    LogicalPlan joined = new Join(base, small, LeftOuter$.MODULE$, Option.apply(on),
        JoinHint$.MODULE$.NONE());
    List<NamedExpression> cols = new ArrayList<>(CollectionConverters.asJava(base.output()));
    Expression found = new Subtract(cast(number.toAttribute(), DataTypes.LongType),
        Literal.create(1L, DataTypes.LongType), Subtract.apply$default$3());
    Alias pos = SelectionPlan.alias(new Coalesce(seq(Arrays.asList(found,
        Literal.create(-1L, DataTypes.LongType)))), "__pu_pos");
    cols.add(pos);
    position[0] = pos.toAttribute();
    return new Project(seq(cols), joined);
  }

  private static void collect(Expression e, List<HdpCells> into) {
    if (e instanceof AggregateExpression
        && ((AggregateExpression) e).aggregateFunction() instanceof HdpCells) {
      HdpCells c = (HdpCells) ((AggregateExpression) e).aggregateFunction();
      for (HdpCells seen : into) {
        if (seen.semanticEquals(c)) {
          return;
        }
      }
      into.add(c);
      return;
    }
    for (Expression c : CollectionConverters.asJava(e.children())) {
      collect(c, into);
    }
  }

  private static Expression code(HdpCells c) {
    List<Expression> kids = new ArrayList<>(CollectionConverters.asJava(c.children()));
    kids.set(HdpCells.GROUP, Literal.create(0, DataTypes.IntegerType));
    kids.set(HdpCells.QUERY, lit("unit"));
    return new HdpRowCode(seq(kids));
  }

  /** The input column {@code column} (exact name first, then case-insensitive), else the
   * MISSING error (PersonRows uses it too). */
  static Attribute find(List<Attribute> input, String column) {
    for (Attribute a : input) {
      if (a.name().equals(column)) {
        return a;
      }
    }
    for (Attribute a : input) {
      if (a.name().equalsIgnoreCase(column)) {
        return a;
      }
    }
    throw new IllegalArgumentException(String.format(MISSING, column));
  }

  /** rank(): the first 15 hex digits of SHA-256 of the texts joined by the separator. */
  private static Expression rank(List<Expression> parts) {
    List<Expression> all = new ArrayList<>();
    all.add(lit(SEP));
    all.addAll(parts);
    Expression hex = new Substring(new Sha2(cast(new ConcatWs(seq(all)), DataTypes.BinaryType),
        Literal.create(256, DataTypes.IntegerType)), Literal.create(1, DataTypes.IntegerType),
        Literal.create(15, DataTypes.IntegerType));
    return cast(new Conv(hex, Literal.create(16, DataTypes.IntegerType),
        Literal.create(10, DataTypes.IntegerType), false), DataTypes.LongType);
  }

  static Alias window(Expression f, List<Expression> by, List<Expression> order,
      boolean running, String name) {
    SpecifiedWindowFrame frame = new SpecifiedWindowFrame(RowFrame$.MODULE$,
        UnboundedPreceding$.MODULE$, running ? CurrentRow$.MODULE$
            : UnboundedFollowing$.MODULE$);
    return SelectionPlan.alias(new WindowExpression(f,
        new WindowSpecDefinition(seq(by), orders(order), frame)), name);
  }

  static Seq<SortOrder> orders(List<Expression> exprs) {
    List<SortOrder> out = new ArrayList<>();
    Seq<Expression> none = seq(new ArrayList<Expression>());
    for (Expression x : exprs) {
      out.add(SortOrder$.MODULE$.apply(x, Ascending$.MODULE$, none));
    }
    return seq(out);
  }

  static Expression cast(Expression e, DataType t) {
    return new Cast(e, t, Option.empty());
  }

  static Literal lit(String s) {
    return Literal.create(UTF8String.fromString(s), DataTypes.StringType);
  }

  static <T> Seq<T> seq(List<T> list) {
    return CollectionConverters.asScala(list).toSeq();
  }
}
