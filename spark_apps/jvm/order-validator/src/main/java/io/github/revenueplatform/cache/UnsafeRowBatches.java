package io.github.revenueplatform.cache;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.columnar.CachedBatch;
import org.apache.spark.sql.columnar.CachedBatchSerializer;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.storage.StorageLevel;
import org.apache.spark.unsafe.Platform;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction2;

/**
 * A cache of rows as Spark's own row bytes ({@code spark.sql.cache.serializer}): each cached batch is
 * one byte array of {@link UnsafeRow}s, written as they come and read in place.
 *
 * <p>Why: the streaming app caches each micro-batch once (the dedupe operator's output) and reads it
 * whole for bronze and the Kafka side outputs. Spark's default cache turns every row into columns
 * (a builder per column, line items as nested arrays) and back into rows for each read, about 8 %
 * of a batch's executor time (bench/results/history.md, "where a live 20,000/s batch's CPU goes").
 * Here a row is copied once in and pointed at on each read. What it gives up: the default cache reads only the columns a query asks for and
 * skips batches by column statistics; neither helps a cache that every reader reads whole, once.
 *
 * <p>Memory: the rows' own size (no compression), in arrays of about {@link #TARGET_BATCH_BYTES}.
 */
public final class UnsafeRowBatches implements CachedBatchSerializer {
    private static final long serialVersionUID = 1L;

    /** A cached batch ends at the first row past this many bytes (a row is never split). */
    static final int TARGET_BATCH_BYTES = 4 << 20;
    /** Before each row: its size (an int) and 4 bytes that keep the row 8-byte aligned. */
    private static final int HEADER_BYTES = 8;

    /** One cached batch: {@code rows} rows in {@code bytes}, each behind its header. */
    static final class RowBatch implements CachedBatch, Serializable {
        private static final long serialVersionUID = 1L;
        final int rows;
        final byte[] bytes;

        RowBatch(int rows, byte[] bytes) {
            this.rows = rows;
            this.bytes = bytes;
        }

        @Override
        public int numRows() {
            return rows;
        }

        @Override
        public long sizeInBytes() {
            return bytes.length;
        }
    }

    @Override
    public boolean supportsColumnarInput(Seq<Attribute> schema) {
        return false;
    }

    @Override
    public boolean supportsColumnarOutput(StructType schema) {
        return false;
    }

    @Override
    public RDD<CachedBatch> convertColumnarBatchToCachedBatch(
            RDD<ColumnarBatch> input, Seq<Attribute> schema, StorageLevel storageLevel, SQLConf conf) {
        throw new UnsupportedOperationException("UnsafeRowBatches caches rows, not columnar batches");
    }

    @Override
    public RDD<ColumnarBatch> convertCachedBatchToColumnarBatch(
            RDD<CachedBatch> input, Seq<Attribute> cacheAttributes, Seq<Attribute> selectedAttributes,
            SQLConf conf) {
        throw new UnsupportedOperationException("UnsafeRowBatches reads rows, not columnar batches");
    }

    @Override
    public RDD<CachedBatch> convertInternalRowToCachedBatch(
            RDD<InternalRow> input, Seq<Attribute> schema, StorageLevel storageLevel, SQLConf conf) {
        List<Attribute> attributes = CollectionConverters.asJava(schema);
        DataType[] types = new DataType[attributes.size()];
        for (int i = 0; i < types.length; i++) {
            types[i] = attributes.get(i).dataType();
        }
        return input.toJavaRDD().mapPartitions(new Pack(types)).rdd();
    }

    @Override
    public RDD<InternalRow> convertCachedBatchToInternalRow(
            RDD<CachedBatch> input, Seq<Attribute> cacheAttributes, Seq<Attribute> selectedAttributes,
            SQLConf conf) {
        List<Attribute> cached = CollectionConverters.asJava(cacheAttributes);
        List<Attribute> selected = CollectionConverters.asJava(selectedAttributes);
        List<Expression> columns = new ArrayList<>(selected.size());
        boolean whole = selected.size() == cached.size();
        for (int i = 0; i < selected.size(); i++) {
            Attribute wanted = selected.get(i);
            int at = indexOf(cached, wanted);
            whole &= at == i;
            columns.add(new BoundReference(at, wanted.dataType(), wanted.nullable()));
        }
        Seq<Expression> projection = whole ? null : CollectionConverters.asScala(columns).toSeq();
        return input.toJavaRDD().mapPartitions(new Unpack(cached.size(), projection)).rdd();
    }

    private static int indexOf(List<Attribute> cached, Attribute wanted) {
        for (int i = 0; i < cached.size(); i++) {
            if (cached.get(i).exprId().equals(wanted.exprId())) {
                return i;
            }
        }
        throw new IllegalArgumentException("column " + wanted + " is not in the cache's " + cached);
    }

    @Override
    public scala.Function2<Object, scala.collection.Iterator<CachedBatch>, scala.collection.Iterator<CachedBatch>>
            buildFilter(Seq<Expression> predicates, Seq<Attribute> cachedAttributes) {
        return new AllBatches();
    }

    /** No batch is skipped: the batches keep no column statistics. */
    private static final class AllBatches
            extends AbstractFunction2<Object, scala.collection.Iterator<CachedBatch>, scala.collection.Iterator<CachedBatch>>
            implements Serializable {
        private static final long serialVersionUID = 1L;

        @Override
        public scala.collection.Iterator<CachedBatch> apply(Object partition, scala.collection.Iterator<CachedBatch> batches) {
            return batches;
        }
    }

    /** Rows into batches, one batch at a time (a partition's rows are not all held twice). */
    private static final class Pack implements FlatMapFunction<Iterator<InternalRow>, CachedBatch> {
        private static final long serialVersionUID = 1L;
        private final DataType[] types;

        Pack(DataType[] types) {
            this.types = types;
        }

        @Override
        public Iterator<CachedBatch> call(Iterator<InternalRow> rows) {
            UnsafeProjection toUnsafe = UnsafeProjection.create(types);
            return new Iterator<CachedBatch>() {
                private byte[] buffer = new byte[64 << 10];

                @Override
                public boolean hasNext() {
                    return rows.hasNext();
                }

                @Override
                public CachedBatch next() {
                    if (!rows.hasNext()) {
                        throw new NoSuchElementException();
                    }
                    int used = 0;
                    int count = 0;
                    while (used < TARGET_BATCH_BYTES && rows.hasNext()) {
                        InternalRow row = rows.next();
                        UnsafeRow unsafe = row instanceof UnsafeRow ? (UnsafeRow) row : toUnsafe.apply(row);
                        int size = unsafe.getSizeInBytes();
                        int needed = used + HEADER_BYTES + size;
                        if (needed > buffer.length) {
                            buffer = Arrays.copyOf(buffer, Math.max(needed, buffer.length * 2));
                        }
                        Platform.putInt(buffer, Platform.BYTE_ARRAY_OFFSET + used, size);
                        unsafe.writeToMemory(buffer, Platform.BYTE_ARRAY_OFFSET + used + HEADER_BYTES);
                        used = needed;
                        count++;
                    }
                    return new RowBatch(count, Arrays.copyOf(buffer, used));
                }
            };
        }
    }

    /** Batches back into rows: one row object pointed at each row in turn (Spark's rows may be reused). */
    private static final class Unpack implements FlatMapFunction<Iterator<CachedBatch>, InternalRow> {
        private static final long serialVersionUID = 1L;
        private final int fields;
        /** The selected columns, or null for all in order. */
        private final Seq<Expression> projection;

        Unpack(int fields, Seq<Expression> projection) {
            this.fields = fields;
            this.projection = projection;
        }

        @Override
        public Iterator<InternalRow> call(Iterator<CachedBatch> batches) {
            UnsafeProjection select = projection == null ? null : UnsafeProjection.create(projection);
            UnsafeRow row = new UnsafeRow(fields);
            return new Iterator<InternalRow>() {
                private byte[] bytes;
                private int position;
                private int left;

                @Override
                public boolean hasNext() {
                    while (left == 0 && batches.hasNext()) {
                        RowBatch batch = (RowBatch) batches.next();
                        bytes = batch.bytes;
                        position = 0;
                        left = batch.rows;
                    }
                    return left > 0;
                }

                @Override
                public InternalRow next() {
                    if (!hasNext()) {
                        throw new NoSuchElementException();
                    }
                    int size = Platform.getInt(bytes, Platform.BYTE_ARRAY_OFFSET + position);
                    row.pointTo(bytes, Platform.BYTE_ARRAY_OFFSET + position + HEADER_BYTES, size);
                    position += HEADER_BYTES + size;
                    left--;
                    return select == null ? row : select.apply(row);
                }
            };
        }
    }
}
