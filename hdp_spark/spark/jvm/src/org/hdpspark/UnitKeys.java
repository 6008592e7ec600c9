package org.hdpspark;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.CaseWhen;
import org.apache.spark.sql.catalyst.expressions.Cast;
import org.apache.spark.sql.catalyst.expressions.Concat;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.Length;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.UTF8String;

import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A privacy unit's groups in a grouped Column beyond {@code keys="public"}: the canonical
 * group text under {@code select_keys} ({@link #keyText}), and a public key list
 * (below).
 *
 * <p>A privacy unit's public key list in a grouped Column ({@code keys=[...]}, decision key
 * {@code "keys"}): each row's group position is the index of its key in the list (the
 * release API's position under {@code keys=} the same list; -1 for any other key, a null or
 * a NaN: the row counts for its person's ε only), and the bounded rows get one more row per
 * listed key at ε 0, so that every listed key has an output row whether or not any person
 * kept rows there (which keys hold kept rows is private under a unit). A row at ε 0 has
 * weight 0: it moves no weight W, numerator N or bin count C, the only statistics the
 * finalizes' noise and outputs read, so a key without kept rows releases what the release
 * API releases for it. Privacy: the list is a public input; positions never depend on other
 * persons' rows.
 */
final class UnitKeys {

  private UnitKeys() {}

  static final String EXPRESSION = "hdp_spark: under `privacy_unit` with a key list or "
      + "keys='public' the aggregate must group by columns of its input (every key gets a "
      + "row, made from the key's values); got the grouping expression %s. Add it as a "
      + "column first (df.withColumn).";

  static final String KEY_TYPE = "ParameterError: under `privacy_unit` with "
      + "`keys=select_keys(...)` every grouping column must hold integers or strings (a "
      + "group enters the ranks as the text of its values); got type %s for %s.";

  /** Under select_keys: the group's canonical text, each value (an integer in decimal, a
   * string as it is) prefixed with its length and ':' ({@code group_key_text}); null when a
   * value is null (the row counts for its person's ε only). A function of the group's own
   * values, never of which other groups exist. */
  static Expression keyText(List<Expression> grouping) {
    List<Expression> parts = new ArrayList<>();
    for (Expression g : grouping) {
      Expression text = textOf(g);
      if (text == null) {
        throw new IllegalArgumentException(String.format(KEY_TYPE,
            g.dataType().simpleString(), g.sql()));
      }
      parts.add(new Cast(new Length(text), DataTypes.StringType, Option.empty()));
      parts.add(Literal.create(UTF8String.fromString(":"), DataTypes.StringType));
      parts.add(text);
    }
    return new Concat(CollectionConverters.asScala(parts).toSeq());
  }

  /** The text the ranks read of an integer or string value (an integer in decimal, a
   * string as it is), as the release API's texts; null for any other type (each caller
   * refuses it with its own message). */
  static Expression textOf(Expression e) {
    DataType t = e.dataType();
    if (t instanceof StringType) {
      return e;
    }
    if (t instanceof LongType || t instanceof IntegerType || t instanceof ShortType
        || t instanceof ByteType) {
      return new Cast(e, DataTypes.StringType, Option.empty());
    }
    return null;
  }

  /** The listed keys as literals of the grouping columns' types (exact, or refused). */
  @SuppressWarnings("unchecked")
  static List<List<Literal>> literals(JsonNode listed, List<Expression> grouping) {
    List<List<Object>> keys;
    try {
      keys = new ObjectMapper().treeToValue(listed, List.class);
    } catch (Exception e) {  // written by hdp_spark's Python side: a bug if it fails
      throw new IllegalStateException("hdp_spark: unreadable key list", e);
    }
    List<List<Literal>> out = new ArrayList<>();
    for (List<Object> key : keys) {
      if (key.size() != grouping.size()) {
        throw new IllegalArgumentException("hdp_spark: every key in `keys` must have "
            + grouping.size() + " value(s), one per grouping column; got " + key.size());
      }
      List<Literal> values = new ArrayList<>();
      for (int j = 0; j < key.size(); j++) {
        values.add(KeyFilter.literal(key.get(j), grouping.get(j)));
      }
      out.add(values);
    }
    return out;
  }

  /** The index of the row's key in the list, as a long; -1 for any other key. */
  static Expression position(List<Expression> grouping, List<List<Literal>> keys) {
    List<Tuple2<Expression, Expression>> branches = new ArrayList<>();
    for (int i = 0; i < keys.size(); i++) {
      Expression all = null;
      for (int j = 0; j < grouping.size(); j++) {
        Expression eq = new EqualTo(grouping.get(j), keys.get(i).get(j));
        all = all == null ? eq : new And(all, eq);
      }
      branches.add(new Tuple2<>(all, Literal.create((long) i, DataTypes.LongType)));
    }
    return new CaseWhen(CollectionConverters.asScala(branches).toSeq(),
        Option.apply(Literal.create(-1L, DataTypes.LongType)));
  }

  /** Under {@code keys="public"}: {@code bounded} with one row at ε_person 0 per group
   * found in {@code keyed} (the input without null or NaN keys), so that every group found
   * (the declared-public set) has an output row, as {@code agg} over the sorted list of
   * those groups releases one per key. Without it a group whose persons all kept other
   * groups would be missing, a deterministic function of those persons' rows. */
  static LogicalPlan withEveryGroup(LogicalPlan bounded, List<Attribute> input,
      List<Expression> grouping, LogicalPlan keyed) {
    List<Integer> at = columns(input, grouping);
    List<NamedExpression> names = new ArrayList<>();
    for (int j = 0; j < grouping.size(); j++) {
      names.add(SelectionPlan.alias(grouping.get(j), "__pu_d" + j));
    }
    LogicalPlan distinct = new Aggregate(CollectionConverters.asScala(grouping).toSeq(),
        CollectionConverters.asScala(names).toSeq(), keyed, Option.empty());
    List<Attribute> output = CollectionConverters.asJava(bounded.output());
    List<NamedExpression> cols = new ArrayList<>();
    for (int i = 0; i < output.size(); i++) {
      Attribute a = output.get(i);
      int j = at.indexOf(i);
      Expression v = j >= 0 ? names.get(j).toAttribute()
          : i == output.size() - 1 ? Literal.create(0.0, DataTypes.DoubleType)
          : Literal.create(null, a.dataType());
      cols.add(SelectionPlan.alias(v, a.name()));
    }
    List<LogicalPlan> both = new ArrayList<>();
    both.add(bounded);
    both.add(new Project(CollectionConverters.asScala(cols).toSeq(), distinct));
    return new Union(CollectionConverters.asScala(both).toSeq(), false, false);
  }

  /** Where each grouping column is among the input's, or the EXPRESSION error. */
  private static List<Integer> columns(List<Attribute> input, List<Expression> grouping) {
    List<Integer> at = new ArrayList<>();
    for (Expression g : grouping) {
      int found = -1;
      for (int i = 0; i < input.size() && g instanceof Attribute; i++) {
        if (input.get(i).semanticEquals(g)) {
          found = i;
        }
      }
      if (found < 0) {
        throw new IllegalArgumentException(String.format(EXPRESSION, g.sql()));
      }
      at.add(found);
    }
    return at;
  }

  /** {@code bounded} (the input's columns, then ε_person) with one row per listed key: the
   * grouping columns set to the key, ε_person 0, every other column null. */
  static LogicalPlan withEveryKey(LogicalPlan bounded, List<Attribute> input,
      List<Expression> grouping, List<List<Literal>> keys) {
    List<Integer> at = columns(input, grouping);
    List<Attribute> output = CollectionConverters.asJava(bounded.output());
    List<Attribute> fresh = new ArrayList<>();
    Seq<String> none = CollectionConverters.asScala(new ArrayList<String>()).toList();
    for (Attribute a : output) {
      fresh.add(new AttributeReference(a.name(), a.dataType(), true, Metadata.empty(),
          NamedExpression.newExprId(), none));
    }
    List<InternalRow> rows = new ArrayList<>();
    Set<List<Object>> seen = new HashSet<>();
    for (List<Literal> key : keys) {
      Object[] values = new Object[output.size()];
      List<Object> raw = new ArrayList<>();
      for (int j = 0; j < key.size(); j++) {
        values[at.get(j)] = key.get(j).value();
        raw.add(key.get(j).value());
      }
      values[output.size() - 1] = 0.0;  // ε_person: weight 0
      if (seen.add(raw)) {
        rows.add(new GenericInternalRow(values));
      }
    }
    LogicalPlan local = new LocalRelation(CollectionConverters.asScala(fresh).toSeq(),
        CollectionConverters.asScala(rows).toSeq(), false, Option.empty());
    List<LogicalPlan> both = new ArrayList<>();
    both.add(bounded);
    both.add(local);
    return new Union(CollectionConverters.asScala(both).toSeq(), false, false);
  }
}
