package org.hdpspark;

import java.time.LocalDate;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;

/**
 * A group's grouping values as JSON text: an array of [type tag, value] pairs, one per
 * grouping expression ({@code []} for a global aggregate). hdp_spark's finalize decodes it into
 * the same group key the release API uses, so both paths bind the same noise to a group.
 */
final class GroupText {
  private GroupText() {}

  /** Whether grouping values of this type can be written (checked when planning). */
  static boolean supported(DataType t) {
    return t instanceof StringType || t instanceof BooleanType || t instanceof ByteType
        || t instanceof ShortType || t instanceof IntegerType || t instanceof LongType
        || t instanceof FloatType || t instanceof DoubleType || t instanceof DateType
        || t instanceof DecimalType || t instanceof TimestampType
        || t instanceof TimestampNTZType || t instanceof BinaryType;
  }

  static String of(Object value, DataType type) {
    if (!(type instanceof StructType)) {
      throw new IllegalStateException(
          "hdp_spark: the group placeholder was not replaced; install the hdp_spark "
          + "optimizer rule (hdp_spark.spark.configure)");
    }
    StructType st = (StructType) type;
    InternalRow row = (InternalRow) value;
    StringBuilder b = new StringBuilder("[");
    StructField[] fields = st.fields();
    for (int i = 0; i < fields.length; i++) {
      if (i > 0) {
        b.append(',');
      }
      DataType t = fields[i].dataType();
      b.append("[\"").append(tag(t)).append("\",");
      if (row == null || row.isNullAt(i)) {
        b.append("null");
      } else {
        value(b, row, i, t);
      }
      b.append(']');
    }
    return b.append(']').toString();
  }

  private static String tag(DataType t) {
    if (t instanceof StringType) return "str";
    if (t instanceof BooleanType) return "bool";
    if (t instanceof ByteType || t instanceof ShortType || t instanceof IntegerType
        || t instanceof LongType) return "int";
    if (t instanceof FloatType || t instanceof DoubleType) return "float";
    if (t instanceof DateType) return "date";
    if (t instanceof DecimalType) return "decimal";
    if (t instanceof TimestampType) return "timestamp";
    if (t instanceof TimestampNTZType) return "timestamp_ntz";
    if (t instanceof BinaryType) return "binary";
    throw new IllegalArgumentException("hdp_spark: unsupported grouping type " + t.simpleString());
  }

  private static void value(StringBuilder b, InternalRow row, int i, DataType t) {
    if (t instanceof StringType) {
      string(b, row.getUTF8String(i).toString());
    } else if (t instanceof BooleanType) {
      b.append(row.getBoolean(i));
    } else if (t instanceof ByteType) {
      b.append(row.getByte(i));
    } else if (t instanceof ShortType) {
      b.append(row.getShort(i));
    } else if (t instanceof IntegerType) {
      b.append(row.getInt(i));
    } else if (t instanceof LongType) {
      b.append(row.getLong(i));
    } else if (t instanceof FloatType || t instanceof DoubleType) {
      double d = t instanceof FloatType ? (double) row.getFloat(i) : row.getDouble(i);
      // exact round trip: the bits as a decimal integer (JSON has no NaN or infinity)
      string(b, Long.toString(Double.doubleToRawLongBits(d)));
    } else if (t instanceof DateType) {
      string(b, LocalDate.ofEpochDay(row.getInt(i)).toString());
    } else if (t instanceof DecimalType) {
      DecimalType dt = (DecimalType) t;
      Decimal d = row.getDecimal(i, dt.precision(), dt.scale());
      string(b, d.toJavaBigDecimal().toPlainString());
    } else if (t instanceof TimestampType || t instanceof TimestampNTZType) {
      b.append(row.getLong(i));
    } else {
      byte[] bytes = row.getBinary(i);
      StringBuilder hex = new StringBuilder();
      for (byte x : bytes) {
        hex.append(String.format("%02x", x & 0xff));
      }
      string(b, hex.toString());
    }
  }

  private static void string(StringBuilder b, String s) {
    b.append('"');
    for (int j = 0; j < s.length(); j++) {
      char c = s.charAt(j);
      if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c < 0x20) {
        b.append(String.format("\\u%04x", (int) c));
      } else {
        b.append(c);
      }
    }
    b.append('"');
  }
}
