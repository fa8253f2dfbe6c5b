package io.github.revenueplatform.state;

import java.io.Serializable;
import java.util.List;
import java.util.Objects;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.codegen.Block;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;

import scala.jdk.javaapi.CollectionConverters;

/**
 * A struct column as one binary column of Spark's own row bytes ({@link UnsafeRow}), and back.
 *
 * <p>Why: the dedupe operator ({@link OrderRepeats}) is a typed {@code transformWithState}, so Spark
 * turns every input row into a Java {@code Row} and every output row back into Spark's bytes. It
 * reads five columns; the others (line items as an array of structs of decimals, above all) only
 * pass through, and converting them both ways was ~40 % of the operator's time
 * (bench/results/history.md, "the dedupe state by bucket of order ids"; packed, its update time fell
 * by ~20 %: "the dedupe operator carries what it does not read as packed row bytes"). Packed into
 * one binary column before the operator and unpacked after it, they cross as one byte array
 * each way: a copy, not a conversion per field. {@code pack(struct)} and {@code unpack(binary,
 * schema)} of the same schema give back the struct's values exactly (the bytes are the values).
 */
public final class RowBytes {
    private RowBytes() {}

    /** {@code struct} (a struct column, not null) as the bytes of its {@link UnsafeRow}. */
    public static Column pack(Column struct) {
        return ExpressionUtils.column(new Pack(ExpressionUtils.expression(struct)));
    }

    /** The struct of {@code schema} that {@link #pack} made {@code bytes} of. */
    public static Column unpack(Column bytes, StructType schema) {
        return ExpressionUtils.column(new Unpack(ExpressionUtils.expression(bytes), schema));
    }

    /**
     * A function of one child, null for a null child, generated as a call of {@code method} on the
     * expression itself (Java cannot extend Spark's {@code UnaryExpression}: a final Scala bridge
     * method hides one it must implement).
     */
    abstract static class OfOneChild extends Expression implements Serializable {
        private static final long serialVersionUID = 1L;
        final Expression child;

        OfOneChild(Expression child) {
            this.child = child;
        }

        /** What the value is for a value of the child, not null. */
        abstract Object of(Object value);

        /** The public method of this class the generated code calls for {@link #of}. */
        abstract String method();

        abstract OfOneChild withChild(Expression newChild);

        @Override
        public scala.collection.immutable.Seq<Expression> children() {
            return CollectionConverters.asScala(List.of(child)).toList();
        }

        @Override
        public Expression withNewChildrenInternal(scala.collection.immutable.IndexedSeq<Expression> children) {
            return withChild(children.apply(0));
        }

        @Override
        public boolean nullable() {
            return child.nullable();
        }

        @Override
        public Object eval(InternalRow input) {
            Object value = child.eval(input);
            return value == null ? null : of(value);
        }

        @Override
        public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
            ExprCode in = child.genCode(ctx);
            String self = ctx.addReferenceObj(getClass().getSimpleName(), this, getClass().getName());
            String type = CodeGenerator.javaType(dataType());
            String code = "\nboolean " + ev.isNull() + " = " + in.isNull() + ";\n"
                    + type + " " + ev.value() + " = null;\n"
                    + "if (!" + ev.isNull() + ") {\n  " + ev.value() + " = " + self + "." + method() + "("
                    + in.value() + ");\n}\n";
            Block block = new CodeBlock(
                    CollectionConverters.asScala(List.of(code)).toList(),
                    CollectionConverters.asScala(List.<JavaCode>of()).toList());
            return ev.copy(in.code().$plus(block), ev.isNull(), ev.value());
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
            throw new IndexOutOfBoundsException(n);
        }

        @Override
        public boolean canEqual(Object other) {
            return other != null && other.getClass() == getClass();
        }

        @Override
        public boolean equals(Object other) {
            return canEqual(other) && child.equals(((OfOneChild) other).child);
        }

        @Override
        public int hashCode() {
            return Objects.hash(getClass(), child);
        }
    }

    /** The bytes of a struct value: a copy, since a projection reuses its row's buffer. */
    public static final class Pack extends OfOneChild {
        private static final long serialVersionUID = 1L;
        /** Made on first use on the executor: only for a struct that is not an UnsafeRow already. */
        private transient UnsafeProjection toUnsafe;

        public Pack(Expression child) {
            super(child);
        }

        public byte[] bytesOf(InternalRow struct) {
            UnsafeRow row;
            if (struct instanceof UnsafeRow unsafe) {
                row = unsafe;
            } else {
                if (toUnsafe == null) {
                    toUnsafe = UnsafeProjection.create((StructType) child.dataType());
                }
                row = toUnsafe.apply(struct);
            }
            byte[] bytes = new byte[row.getSizeInBytes()];
            row.writeToMemory(bytes, Platform.BYTE_ARRAY_OFFSET);
            return bytes;
        }

        @Override
        Object of(Object value) {
            return bytesOf((InternalRow) value);
        }

        @Override
        String method() {
            return "bytesOf";
        }

        @Override
        OfOneChild withChild(Expression newChild) {
            return new Pack(newChild);
        }

        @Override
        public DataType dataType() {
            return DataTypes.BinaryType;
        }
    }

    /** A struct of {@code schema} read in place from the bytes {@link Pack} made. */
    public static final class Unpack extends OfOneChild {
        private static final long serialVersionUID = 1L;
        private final StructType schema;

        public Unpack(Expression child, StructType schema) {
            super(child);
            this.schema = schema;
        }

        public InternalRow rowOf(byte[] bytes) {
            UnsafeRow row = new UnsafeRow(schema.length());
            row.pointTo(bytes, bytes.length);
            return row;
        }

        @Override
        Object of(Object value) {
            return rowOf((byte[]) value);
        }

        @Override
        String method() {
            return "rowOf";
        }

        @Override
        OfOneChild withChild(Expression newChild) {
            return new Unpack(newChild, schema);
        }

        @Override
        public DataType dataType() {
            return schema;
        }

        @Override
        public int productArity() {
            return 2;
        }

        @Override
        public Object productElement(int n) {
            return n == 1 ? schema : super.productElement(n);
        }

        @Override
        public boolean equals(Object other) {
            return super.equals(other) && schema.equals(((Unpack) other).schema);
        }

        @Override
        public int hashCode() {
            return Objects.hash(super.hashCode(), schema);
        }
    }
}
