package org.hdpspark;

import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SpecifiedWindowFrame;
import org.apache.spark.sql.catalyst.expressions.UnboundedFollowing$;
import org.apache.spark.sql.catalyst.expressions.UnboundedPreceding$;
import org.apache.spark.sql.catalyst.expressions.WindowExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateFunction;
import org.apache.spark.sql.catalyst.expressions.aggregate.Average;
import org.apache.spark.sql.catalyst.expressions.aggregate.Sum;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.Deduplicate;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.execution.datasources.v2.FileTable;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;

import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * What may stand below a DP aggregate: refuses, at analysis, every construct that can change
 * the aggregated rows between two evaluations of one query.
 *
 * <p>Privacy: a release's noise is keyed by the fingerprint of what it aggregates
 * ({@link QueryFingerprint}) and the exact statistics. If the rows could change while the
 * fingerprint stays, one fingerprint would cover two data sets: the outputs tie exactly when
 * the statistics tie (an equality test of a guessed value), and differ on every evaluation
 * otherwise (noise to average away). Writing such a construct "as itself" in the fingerprint
 * does not help (the rows still change under it), and pinning its value at analysis makes
 * every Spark Connect action, which analyzes again, a new release. So everything the rows
 * depend on is either written in the fingerprint (constants, the plan, local rows, each
 * source file's path, size and modification time) or refused here:
 *
 * <ul>
 *   <li>time and session functions ({@code current_timestamp()}, {@code current_user()},
 *       ...): their value changes between evaluations;
 *   <li>nondeterministic expressions ({@code rand}, {@code uuid}, {@code shuffle},
 *       {@code monotonically_increasing_id}, {@code input_file_name}, {@code reflect},
 *       nondeterministic UDFs);
 *   <li>operators whose rows depend on partitioning or arrival order ({@code LIMIT},
 *       {@code OFFSET}, {@code TABLESAMPLE}, {@code sample}, a partial
 *       {@code dropDuplicates}, {@code row_number}/{@code lag}/ROWS frames in a window,
 *       Python code over batches of rows), and aggregates whose result depends on arrival
 *       order ({@code first}, {@code collect_list}, {@code max_by}, floating-point
 *       {@code sum}/{@code avg}, whose last bits follow the order of addition);
 *   <li>sources the fingerprint cannot pin (JDBC, streaming, catalog tables other than
 *       files), and any operator not known here to give the same rows on every evaluation.
 * </ul>
 *
 * <p>The fix is the same for all: materialize the input first ({@code localCheckpoint()},
 * {@code checkpoint()} or a written table), or for a time function pass its value as a
 * literal. The messages name the construct (query text, never data).
 */
final class QueryGuard {

  private QueryGuard() {}

  static final String FIX = " Materialize the input first (df = df.localCheckpoint(), "
      + "df.checkpoint(), or write it as a table and read it back): the release then "
      + "aggregates fixed rows. cache() is not enough: an evicted cache is computed again.";

  private static final Set<String> TIME = new HashSet<>(Arrays.asList(
      "CurrentTimestamp", "CurrentTimestampNanos", "Now", "CurrentDate", "CurrentTime",
      "CurrentTimeZone", "CurrentUser", "CurrentDatabase", "CurrentCatalog", "CurrentPath",
      "CurrentBatchTimestamp", "LocalTimestamp", "LocalTimestampNanos"));

  /** Aggregates whose result is exact and independent of the order of their rows. */
  private static final Set<String> EXACT_AGGREGATES = new HashSet<>(Arrays.asList(
      "Count", "CountIf", "Min", "Max", "BitAndAgg", "BitOrAgg", "BitXorAgg", "BoolAnd",
      "BoolOr", "HyperLogLogPlusPlus", "Percentile", "PercentileCont", "PercentileDisc",
      "Median", "RegrCount", "CountMinSketchAgg", "BloomFilterAggregate", "PivotFirst",
      "HdpCells", "HdpRecords", "HdpUsers", "HdpLdpCells"));

  /** Window functions that give tied rows the same value (no arrival order). */
  private static final Set<String> TIE_STABLE_WINDOW = new HashSet<>(Arrays.asList(
      "Rank", "DenseRank", "PercentRank", "CumeDist"));

  /** Operators that give the same multiset of rows on every evaluation of the same input
   * (given that their expressions pass the expression checks). */
  private static final Set<String> ROW_STABLE = new HashSet<>(Arrays.asList(
      "Project", "Filter", "Aggregate", "Join", "Union", "Intersect", "Except", "Distinct",
      "Sort", "Repartition", "RepartitionByExpression", "RebalancePartitions",
      "ResolvedHint", "SubqueryAlias", "View", "Expand", "Generate", "Window", "WithCTE",
      "CTERelationDef", "CTERelationRef", "Deduplicate", "LateralJoin", "LocalRelation", "LogicalRDD",
      "Range", "OneRowRelation", "LogicalRelation", "DataSourceV2Relation", "EmptyRelation",
      "Subquery"));

  /** Refuses {@code a}'s input, grouping or hdp aggregate {@code agg} if the rows it
   * aggregates could change between two evaluations. */
  static void check(Aggregate a, Expression agg) {
    for (Expression g : CollectionConverters.asJava(a.groupingExpressions())) {
      expression(g);
    }
    expression(agg);
    a.child().foreachWithSubqueries(new AbstractFunction1<LogicalPlan, BoxedUnit>() {
      @Override
      public BoxedUnit apply(LogicalPlan p) {
        operator(p);
        for (Expression e : CollectionConverters.asJava(p.expressions())) {
          expression(e);
        }
        return BoxedUnit.UNIT;
      }
    });
  }

  private static String name(Object o) {
    return o.getClass().getSimpleName();
  }

  /** The query text of {@code e}, shortened (the caller's own query: constants, column
   * names and functions, never data). */
  private static String text(Expression e) {
    String s;
    try {
      s = e.sql();
    } catch (RuntimeException ex) {
      s = e.prettyName() + "(...)";
    }
    return s.length() > 80 ? s.substring(0, 77) + "..." : s;
  }

  private static IllegalArgumentException refuse(String what, String why, String fix) {
    return new IllegalArgumentException("hdp_spark: " + what + " below a DP aggregate is "
        + "refused: " + why + fix);
  }

  private static void expression(Expression e) {
    String kind = name(e);
    if (TIME.contains(kind)) {
      throw refuse("`" + e.prettyName() + "()`", "its value changes between evaluations of "
          + "one query, so one release could aggregate two different data sets.",
          " Compute the value once and pass it as a literal (F.lit(value), or a constant in "
          + "SQL), or materialize the input first (df = df.localCheckpoint()).");
    }
    if (e instanceof WindowExpression) {
      window((WindowExpression) e);
    }
    if (e instanceof AggregateFunction) {
      aggregate((AggregateFunction) e);
    }
    boolean inner = false;  // the innermost nondeterministic expression is named
    for (Expression c : CollectionConverters.asJava(e.children())) {
      inner |= !c.deterministic();
    }
    if (!e.deterministic() && !inner) {
      boolean seeded = kind.equals("Rand") || kind.equals("Randn") || kind.equals("Uuid")
          || kind.equals("Shuffle") || kind.equals("Randstr") || kind.equals("Uniform");
      throw refuse("the nondeterministic expression `" + text(e) + "`", "it can give other "
          + "values on every evaluation" + (seeded ? " (a seed does not help: Spark draws "
          + "per partition, and partitions change)" : "") + ", so one release could "
          + "aggregate two different data sets.", FIX);
    }
    for (Expression c : CollectionConverters.asJava(e.children())) {
      expression(c);
    }
  }

  private static boolean floating(DataType t) {
    return t instanceof DoubleType || t instanceof FloatType;
  }

  private static void aggregate(AggregateFunction f) {
    String kind = name(f);
    if (EXACT_AGGREGATES.contains(kind)
        || f instanceof org.apache.spark.sql.catalyst.expressions.AggregateWindowFunction) {
      return;  // a window function (rank, row_number...): judged by window()
    }
    if ((f instanceof Sum && !floating(((Sum) f).child().dataType()))
        || (f instanceof Average && !floating(((Average) f).child().dataType()))) {
      return;  // integers and decimals add exactly, in any order
    }
    if (f instanceof Sum || f instanceof Average) {
      throw refuse("`" + text(f) + "` over floating-point values", "Spark adds them in the "
          + "order they arrive, which changes between evaluations and can change the "
          + "result.", " Cast the values to DECIMAL first (exact in any order), or "
          + "materialize the input (df = df.localCheckpoint()).");
    }
    throw refuse("the aggregate `" + f.prettyName() + "`", "its result can depend on the "
        + "order in which rows arrive, which changes between evaluations (exact and "
        + "order-free aggregates are allowed: count, min, max, sum and avg of integers or "
        + "decimals, percentile).", FIX);
  }

  private static void window(WindowExpression w) {
    Expression f = w.windowFunction();
    if (!(f instanceof org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression)
        && !TIE_STABLE_WINDOW.contains(name(f))) {
      throw refuse("the window function `" + f.prettyName() + "`", "it numbers or offsets "
          + "rows in an order that ties leave to partitioning, which changes between "
          + "evaluations (rank, dense_rank, percent_rank and cume_dist are allowed).", FIX);
    }
    Object frame = w.windowSpec().frameSpecification();
    boolean framed = f instanceof
        org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
    if (framed && frame instanceof SpecifiedWindowFrame) {  // ranks ignore their frame
      SpecifiedWindowFrame s = (SpecifiedWindowFrame) frame;
      boolean rows = "RowFrame$".equals(name(s.frameType()));
      boolean whole = s.lower() == UnboundedPreceding$.MODULE$
          && s.upper() == UnboundedFollowing$.MODULE$;
      if (rows && !whole) {
        throw refuse("a ROWS window frame", "which rows fall in it depends on the order of "
            + "tied rows, which changes between evaluations (use a RANGE frame).", FIX);
      }
    }
  }

  private static void operator(LogicalPlan p) {
    String kind = name(p);
    if (p.isStreaming()) {
      throw refuse("a streaming source", "its rows change with every micro-batch.", FIX);
    }
    switch (kind) {
      case "GlobalLimit": case "LocalLimit": case "Limit": case "Offset": case "Tail":
      case "LimitAll":
        throw refuse("`LIMIT`/`OFFSET`/`tail` (" + kind + ")", "which rows it keeps depends "
            + "on partitioning, which changes between evaluations.", FIX);
      case "Sample":
        throw refuse("`TABLESAMPLE`/`sample(...)`", "which rows it keeps depends on "
            + "partitioning (with or without a seed), which changes between evaluations.",
            FIX);
      default:
        break;
    }
    if (p instanceof Deduplicate) {
      Deduplicate d = (Deduplicate) p;
      Set<Long> keys = new HashSet<>();
      for (Attribute k : CollectionConverters.asJava(d.keys())) {
        keys.add(k.exprId().id());
      }
      for (Attribute o : CollectionConverters.asJava(d.child().output())) {
        if (!keys.contains(o.exprId().id())) {
          throw refuse("`dropDuplicates` on some columns", "which of the duplicates it "
              + "keeps depends on arrival order, which changes between evaluations "
              + "(dropDuplicates() on all columns is allowed).", FIX);
        }
      }
    }
    if (p instanceof LogicalRelation
        && !(((LogicalRelation) p).relation() instanceof HadoopFsRelation)) {
      throw refuse("the source `" + name(((LogicalRelation) p).relation()) + "`", "its "
          + "contents can change between evaluations and the query fingerprint cannot "
          + "pin them (files are pinned by path, size and modification time).", FIX);
    }
    if (p instanceof DataSourceV2Relation
        && !(((DataSourceV2Relation) p).table() instanceof FileTable)) {
      throw refuse("the table `" + ((DataSourceV2Relation) p).table().name() + "`", "its "
          + "contents can change between evaluations and the query fingerprint cannot "
          + "pin them.", FIX);
    }
    if (!ROW_STABLE.contains(kind)) {
      boolean python = kind.contains("Pandas") || kind.contains("Arrow")
          || kind.contains("Python");
      throw refuse("the operator `" + kind + "`", python
          ? "it runs Python code over batches of rows, which partitioning forms "
            + "differently between evaluations."
          : "hdp_spark does not know it to give the same rows on every evaluation.", FIX);
    }
  }

  /** The operators allowed below a DP aggregate (for the docs' tests). */
  static List<String> allowed() {
    return new java.util.ArrayList<>(new java.util.TreeSet<>(ROW_STABLE));
  }
}
