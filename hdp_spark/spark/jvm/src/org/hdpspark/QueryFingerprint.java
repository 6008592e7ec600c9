package org.hdpspark;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData;
import org.apache.spark.sql.catalyst.expressions.UnsafeMapData;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.plans.QueryPlan$;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.trees.TreeNode;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.execution.datasources.v2.FileTable;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.unsafe.types.UTF8String;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The fingerprint of "what is aggregated": a SHA-256 digest of the canonical form of an
 * aggregate's input plan, its grouping expressions and the aggregate expression itself.
 *
 * <p>Privacy: the finalize derives each query's noise key from the release key and this
 * fingerprint, so two different queries (another filter, projection, CASE WHEN, join, source,
 * FILTER clause, grouping or argument) draw independent noise even when their statistics are
 * equal, while re-evaluating one query (show, collect, write, a retry, AQE, a cached input)
 * gives the same fingerprint: it is computed once, at analysis, from the analyzed plan (cache
 * substitution and optimization come later).
 *
 * <p>Canonical form: Spark's own canonicalization (the one {@code sameResult} and the cache
 * manager rely on: expression ids replaced by ordinals, names erased), then every field of
 * every node written out, so that two plans with the same fingerprint are equal as canonical
 * plans. A constant expression is written as its value and type. Fields Spark's printed form
 * leaves out are written in full: file sources by their root paths and every file's path,
 * size and modification time (a rewritten file makes another query), RDD-backed tables by
 * their RDD id, local tables by their rows, Python and Scala functions by their bytes or
 * identity. A local table's rows and a source's file listing enter through a MAC keyed with
 * a secret of this JVM, so the fingerprint (a constant in the plan, visible in
 * {@code explain()}) carries no unkeyed hash of data; the cost is that a Spark server
 * restart makes such a query a new release. An object of a kind not listed is written as
 * its class and {@code hashCode()} (consistent with equality).
 *
 * <p>What the fingerprint cannot see is refused before it is computed ({@link QueryGuard}):
 * time and session functions, nondeterministic expressions and operators, order-dependent
 * aggregates, sources it cannot pin. Why the noise stays bound to the exact statistics too:
 * were it bound to the fingerprint alone, a fingerprint covering two data sets would
 * publish their exact difference (f(D) + N - (f(D') + N)); bound to the statistics it can
 * at most tell whether they are equal. The guard closes both.
 */
public final class QueryFingerprint {

  private QueryFingerprint() {}

  private static final byte[] JVM_SECRET = new byte[32];

  static {
    new SecureRandom().nextBytes(JVM_SECRET);
  }

  private static final int MAX_DEPTH = 10_000;

  /** The fingerprint of aggregate expression {@code agg} over {@code child} grouped by
   * {@code grouping}, as lowercase hex. */
  static String of(LogicalPlan child, Seq<Expression> grouping, Expression agg) {
    Seq<Attribute> input = child.output();
    Writer w = new Writer();
    w.text("hdp_spark/query/v1");
    w.node(child.canonicalized(), 0);
    w.tag('G');
    List<Expression> groups = CollectionConverters.asJava(grouping);
    w.out(groups.size());
    for (Expression g : groups) {
      w.node(normalize(g, input), 0);
    }
    w.tag('A');
    w.node(normalize(agg, input), 0);
    return hex(sha256(w.bytes()));
  }

  /**
   * The classes of the objects in {@code plan}'s canonical form that the fingerprint writes
   * by their equality hash (no specific rule): a diagnostic for tests, which check that the
   * usual sources and expressions need none.
   */
  public static String opaqueParts(LogicalPlan plan) {
    Writer w = new Writer();
    w.node(plan.canonicalized(), 0);
    return String.join(",", new java.util.TreeSet<>(w.opaque));
  }

  /** The serialized canonical form of {@code plan} (a diagnostic). */
  public static byte[] serialized(LogicalPlan plan) {
    Writer w = new Writer();
    w.node(plan.canonicalized(), 0);
    return w.bytes();
  }

  private static Expression normalize(Expression e, Seq<Attribute> input) {
    return QueryPlan$.MODULE$.normalizeExpressions(e,
        org.apache.spark.sql.catalyst.expressions.package$.MODULE$.AttributeSeq(input));
  }

  static byte[] sha256(byte[] data) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(data);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("hdp_spark: SHA-256 is not available", e);
    }
  }

  static byte[] mac(byte[] data) {
    try {
      Mac m = Mac.getInstance("HmacSHA256");
      m.init(new SecretKeySpec(JVM_SECRET, "HmacSHA256"));
      return m.doFinal(data);
    } catch (java.security.GeneralSecurityException e) {
      throw new IllegalStateException("hdp_spark: HmacSHA256 is not available", e);
    }
  }

  /**
   * What a file source holds: every file's path, size and modification time, sorted, through
   * the MAC (sizes are a function of the data; the fingerprint is printed by explain()). A
   * rewritten file is then another query, with fresh noise. A source whose files cannot be
   * listed is refused.
   */
  static byte[] listing(FileIndex index) {
    List<String> files = new ArrayList<>();
    try {
      scala.collection.immutable.Seq<Expression> none =
          CollectionConverters.asScala(new ArrayList<Expression>()).toSeq();
      for (PartitionDirectory dir : CollectionConverters.asJava(index.listFiles(none, none))) {
        for (FileStatusWithMetadata f : CollectionConverters.asJava(dir.files())) {
          files.add(f.getPath().toString() + "\0" + f.getLen() + "\0"
              + f.getModificationTime());
        }
      }
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("hdp_spark: the files of a source below a DP "
          + "aggregate could not be listed (" + e.getClass().getSimpleName() + "), so the "
          + "query fingerprint cannot pin them." + QueryGuard.FIX, e);
    }
    Collections.sort(files);
    Writer w = new Writer();
    w.out(files.size());
    for (String f : files) {
      w.text(f);
    }
    return mac(w.bytes());
  }

  static String hex(byte[] bytes) {
    StringBuilder b = new StringBuilder(bytes.length * 2);
    for (byte x : bytes) {
      b.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
    }
    return b.toString();
  }

  /** A deterministic, self-delimiting serialization of plan objects. */
  static final class Writer {
    private final ByteArrayOutputStream buf = new ByteArrayOutputStream();
    private final DataOutputStream out = new DataOutputStream(buf);
    private final IdentityHashMap<Object, Boolean> path = new IdentityHashMap<>();
    final List<String> opaque = new ArrayList<>();

    byte[] bytes() {
      return buf.toByteArray();
    }

    void tag(char c) {
      try {
        out.writeByte(c);
      } catch (IOException e) {
        throw new IllegalStateException(e);
      }
    }

    void out(long v) {
      try {
        out.writeLong(v);
      } catch (IOException e) {
        throw new IllegalStateException(e);
      }
    }

    void raw(byte[] b) {
      out(b.length);
      try {
        out.write(b);
      } catch (IOException e) {
        throw new IllegalStateException(e);
      }
    }

    void text(String s) {
      tag('S');
      raw(s.getBytes(StandardCharsets.UTF_8));
    }

    void node(Object o, int depth) {
      if (depth > MAX_DEPTH) {
        throw new IllegalStateException("hdp_spark: a query plan nested deeper than "
            + MAX_DEPTH + " levels cannot be fingerprinted");
      }
      if (o == null) {
        tag('N');
        return;
      }
      if (path.containsKey(o)) {  // a cycle through non-tree fields: written as a marker
        tag('C');
        text(o.getClass().getName());
        return;
      }
      path.put(o, Boolean.TRUE);
      try {
        write(o, depth + 1);
      } finally {
        path.remove(o);
      }
    }

    private void write(Object o, int d) {
      if (o instanceof String) {
        text((String) o);
      } else if (o instanceof UTF8String) {
        tag('U');
        raw(((UTF8String) o).getBytes());
      } else if (o instanceof Number || o instanceof Boolean || o instanceof Character) {
        tag('V');
        text(o.getClass().getName());
        text(o instanceof Double ? Long.toString(Double.doubleToLongBits((Double) o))
            : o instanceof Float ? Integer.toString(Float.floatToIntBits((Float) o))
            : o.toString());
      } else if (o instanceof Decimal) {
        tag('D');
        text(((Decimal) o).toJavaBigDecimal().toString());
      } else if (o instanceof byte[]) {
        tag('B');
        raw((byte[]) o);
      } else if (o instanceof org.apache.spark.sql.catalyst.expressions.ExprId) {
        // an id without its JVM's random UUID: canonical ids are ordinals in every JVM
        tag('I');
        out(((org.apache.spark.sql.catalyst.expressions.ExprId) o).id());
      } else if (o instanceof org.apache.spark.sql.types.Metadata) {
        tag('J');
        text(((org.apache.spark.sql.types.Metadata) o).json());
      } else if (o instanceof DataType) {
        tag('Y');
        text(((DataType) o).json());
      } else if (o instanceof LocalRelation) {
        LocalRelation r = (LocalRelation) o;
        tag('L');
        node(r.output(), d);
        // the rows, keyed (see the class comment); their order is part of the table
        Writer rows = new Writer();
        for (InternalRow row : CollectionConverters.asJava(r.data())) {
          rows.node(row, 0);
        }
        opaque.addAll(rows.opaque);
        raw(mac(rows.bytes()));
        node(r.isStreaming(), d);
      } else if (o instanceof Expression && folded((Expression) o, d)) {
        return;
      } else if (o instanceof TreeNode) {
        tag('T');
        text(o.getClass().getName());
        product((scala.Product) o, d);
      } else if (o instanceof UnsafeRow) {
        tag('R');
        raw(((UnsafeRow) o).getBytes());
      } else if (o instanceof GenericInternalRow) {
        tag('R');
        Object[] values = ((GenericInternalRow) o).values();
        out(values.length);
        for (Object v : values) {
          node(v, d);
        }
      } else if (o instanceof UnsafeArrayData) {
        tag('a');
        raw(((UnsafeArrayData) o).toByteArray());
      } else if (o instanceof GenericArrayData) {
        tag('a');
        Object[] values = ((GenericArrayData) o).array();
        out(values.length);
        for (Object v : values) {
          node(v, d);
        }
      } else if (o instanceof UnsafeMapData || o instanceof MapData) {
        tag('m');
        MapData m = (MapData) o;
        node(m.keyArray(), d);
        node(m.valueArray(), d);
      } else if (o instanceof InternalRow || o instanceof ArrayData) {
        tag('?');  // another row or array layout: its class and content hash
        text(o.getClass().getName());
        opaque.add(o.getClass().getName());
        out(o.hashCode());
      } else if (o instanceof RDD) {
        tag('r');  // a table backed by an RDD: that RDD (stable while its session lives)
        out(((RDD<?>) o).id());
      } else if (o instanceof org.apache.spark.broadcast.Broadcast) {
        tag('b');
        out(((org.apache.spark.broadcast.Broadcast<?>) o).id());
      } else if (o instanceof org.apache.spark.util.AccumulatorV2) {
        tag('c');
        out(((org.apache.spark.util.AccumulatorV2<?, ?>) o).id());
      } else if (o instanceof FileIndex) {
        tag('F');  // a file source: its kind and its root paths
        text(o.getClass().getName());
        List<String> paths = new ArrayList<>();
        for (Object p : CollectionConverters.asJava(((FileIndex) o).rootPaths())) {
          paths.add(p.toString());
        }
        Collections.sort(paths);
        out(paths.size());
        for (String p : paths) {
          text(p);
        }
        raw(listing((FileIndex) o));
      } else if (o instanceof FileTable) {
        tag('t');  // a file table of a version-2 source: its files (see above)
        text(o.getClass().getName());
        node(((FileTable) o).fileIndex(), d);
        node(((FileTable) o).schema(), d);
      } else if (o instanceof org.apache.spark.sql.execution.datasources.FileFormat) {
        tag('f');  // a file format: equal by class (Spark's own equality)
        text(o.getClass().getName());
      } else if (o instanceof scala.collection.Map) {
        tag('M');
        sorted(CollectionConverters.asJava(((scala.collection.Map<?, ?>) o).toSeq()), d);
      } else if (o instanceof scala.collection.Set) {
        tag('E');
        sorted(CollectionConverters.asJava(((scala.collection.Set<?>) o).toSeq()), d);
      } else if (o instanceof scala.collection.Iterable) {
        tag('Q');
        List<?> items = CollectionConverters.asJava(((scala.collection.Iterable<?>) o).toSeq());
        out(items.size());
        for (Object v : items) {
          node(v, d);
        }
      } else if (o instanceof Map) {
        tag('M');
        List<Object> entries = new ArrayList<>();
        for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
          entries.add(new scala.Tuple2<>(e.getKey(), e.getValue()));
        }
        sorted(entries, d);
      } else if (o instanceof Iterable) {
        tag('Q');
        List<Object> items = new ArrayList<>();
        ((Iterable<?>) o).forEach(items::add);
        out(items.size());
        for (Object v : items) {
          node(v, d);
        }
      } else if (o instanceof Object[]) {
        tag('Q');
        Object[] items = (Object[]) o;
        out(items.length);
        for (Object v : items) {
          node(v, d);
        }
      } else if (o.getClass().isArray()) {
        tag('q');  // a primitive array: element by element
        int n = java.lang.reflect.Array.getLength(o);
        out(n);
        for (int i = 0; i < n; i++) {
          node(java.lang.reflect.Array.get(o, i), d);
        }
      } else if (o instanceof Enum) {
        tag('e');
        text(o.getClass().getName() + "." + ((Enum<?>) o).name());
      } else if (o instanceof scala.Product) {
        tag('P');
        text(o.getClass().getName());
        product((scala.Product) o, d);
      } else {
        tag('O');  // any other object: its class and its equality hash
        text(o.getClass().getName());
        opaque.add(o.getClass().getName());
        out(o.hashCode());
      }
    }

    /**
     * A constant expression as its value and type (nullability left out): {@code CAST(17 AS
     * BIGINT)} and {@code 17L}, or {@code array(1.0D)} and a constant array, are one constant.
     * False (nothing written) when it cannot be evaluated here.
     */
    private boolean folded(Expression e, int d) {
      if (!e.foldable() || !e.deterministic()) {
        return false;
      }
      Object value;
      try {
        value = e.eval(null);
      } catch (RuntimeException ex) {  // e.g. an ANSI cast error: written as an expression
        return false;
      }
      tag('K');
      node(value, d);
      text(e.dataType().asNullable().json());
      return true;
    }

    private void product(scala.Product p, int d) {
      int n = p.productArity();
      out(n);
      for (int i = 0; i < n; i++) {
        node(p.productElement(i), d);
      }
    }

    /** Unordered items: each serialized on its own, then written in byte order. */
    private void sorted(List<?> items, int d) {
      List<byte[]> parts = new ArrayList<>();
      for (Object v : items) {
        Writer one = new Writer();
        one.node(v, d);
        opaque.addAll(one.opaque);
        parts.add(one.bytes());
      }
      parts.sort(Arrays::compare);
      out(parts.size());
      for (byte[] part : parts) {
        raw(part);
      }
    }
  }
}
