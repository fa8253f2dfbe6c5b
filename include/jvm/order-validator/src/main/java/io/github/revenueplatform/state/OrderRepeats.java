package io.github.revenueplatform.state;

import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;

import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessorWithInitialState;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The streaming app's dedupe, kept in Spark's state store (RocksDB, checkpointed with the query).
 *
 * <p>The rule ({@code spark_apps.contract.DEDUPE_RULE}, also applied by the reprocess job and the
 * quality suite): a valid copy of an order is a <em>repeat</em> when the copy of the same
 * {@code order_id} that arrived just before it (arrival order: the micro-batch, then Kafka
 * timestamp, partition, offset) has a Kafka timestamp at most the horizon before its own. Every
 * input row comes out once, unchanged, plus {@code repeat} (boolean, not null): invalid rows
 * (a {@code dlq_reason}) are never repeats and never touch state.
 *
 * <p>State per order id: the Kafka timestamp (ms) of its last copy, dropped once the query's
 * watermark, defined on the Kafka timestamp, is past that time plus the horizon: no later copy can
 * be a repeat of it then (one arriving more than the watermark's delay behind the newest record
 * would be, and is not counted as one). Eviction follows Kafka time, not the wall clock, so a
 * stopped app forgets nothing while it is down and a replay of a month keeps about one horizon of
 * ids. An event-time timer per id (at its last copy plus the horizon; a later copy moves it when it
 * fires) says when to look.
 *
 * <p>Spark drops rows behind the watermark before an event-time operator only when its input
 * carries the watermark's column, and no row may be dropped here (bronze keeps every record): the
 * caller defines the watermark on a copy of the Kafka timestamp and drops that copy before this
 * operator ({@code spark_apps.dedupe.with_repeats}).
 */
public final class OrderRepeats extends StatefulProcessorWithInitialState<Long, Row, Row, Long> {
    private static final long serialVersionUID = 1L;

    public static final String REPEAT_COLUMN = "repeat";

    private final long horizonMs;
    private final int timestampIdx;
    private final int partitionIdx;
    private final int offsetIdx;
    private final int invalidReasonIdx;
    private final int orderIdIdx;
    private final int width;

    /** Kafka timestamp (ms) of the order's last copy. Created in init(), on the executor. */
    private transient ValueState<Long> lastArrival;

    private OrderRepeats(StructType input, long horizonMs) {
        if (horizonMs < 0) {
            throw new IllegalArgumentException("horizonMs must be >= 0, got " + horizonMs);
        }
        this.horizonMs = horizonMs;
        this.timestampIdx = input.fieldIndex("timestamp");
        this.partitionIdx = input.fieldIndex("partition");
        this.offsetIdx = input.fieldIndex("offset");
        this.invalidReasonIdx = input.fieldIndex("dlq_reason");
        this.orderIdIdx = input.fieldIndex("order_id");
        this.width = input.length();
    }

    /**
     * {@code rows} (needs order_id, timestamp, partition, offset, dlq_reason; a watermark on
     * timestamp) with {@code repeat}. {@code initial}, when not null, is the state a new query
     * starts from: one row per order id of (order_id long, last_arrival_ms long).
     */
    public static Dataset<Row> apply(Dataset<Row> rows, long horizonMs, Dataset<Row> initial) {
        StructType input = rows.schema();
        Encoder<Row> output = Encoders.row(input.add(REPEAT_COLUMN, DataTypes.BooleanType, false));
        // A long key: Spark sorts each batch by it before the operator, and compares longs by their
        // sort prefix alone (a string key's compares were a sixth of the operator's time).
        KeyValueGroupedDataset<Long, Row> byOrder = rows.groupByKey(new StateKey(input), Encoders.LONG());
        OrderRepeats processor = new OrderRepeats(input, horizonMs);
        if (initial == null) {
            return byOrder.transformWithState(processor, TimeMode.EventTime(), OutputMode.Append(), output);
        }
        KeyValueGroupedDataset<Long, Long> initialState = initial
                .groupByKey(new InitialKey(), Encoders.LONG())
                .mapValues(new InitialValue(), Encoders.LONG());
        return byOrder.transformWithState(
                processor, TimeMode.EventTime(), OutputMode.Append(), initialState, output, Encoders.LONG());
    }

    /**
     * The order id of a valid row. An invalid row never touches state, so its key only spreads it
     * over the partitions: a negative number from its position (two invalid rows, or an invalid row
     * and an order, sharing a key is harmless), so no group holds every invalid row of a batch.
     */
    static final class StateKey implements MapFunction<Row, Long> {
        private static final long serialVersionUID = 1L;
        private final int orderIdIdx;
        private final int invalidReasonIdx;
        private final int partitionIdx;
        private final int offsetIdx;

        StateKey(StructType input) {
            this.orderIdIdx = input.fieldIndex("order_id");
            this.invalidReasonIdx = input.fieldIndex("dlq_reason");
            this.partitionIdx = input.fieldIndex("partition");
            this.offsetIdx = input.fieldIndex("offset");
        }

        @Override
        public Long call(Row row) {
            if (row.isNullAt(invalidReasonIdx) && !row.isNullAt(orderIdIdx)) {
                return ((Number) row.get(orderIdIdx)).longValue();
            }
            return -1L - (((long) row.getInt(partitionIdx) << 40) ^ row.getLong(offsetIdx));
        }
    }

    static final class InitialKey implements MapFunction<Row, Long> {
        private static final long serialVersionUID = 1L;

        @Override
        public Long call(Row row) {
            return ((Number) row.get(0)).longValue();
        }
    }

    static final class InitialValue implements MapFunction<Row, Long> {
        private static final long serialVersionUID = 1L;

        @Override
        public Long call(Row row) {
            return row.getLong(1);
        }
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        lastArrival = getHandle().getValueState("last_arrival_ms", Encoders.LONG(), TTLConfig.NONE());
    }

    @Override
    public void handleInitialState(Long orderId, Long lastArrivalMs, TimerValues timerValues) {
        lastArrival.update(lastArrivalMs);
        getHandle().registerTimer(lastArrivalMs + horizonMs);
    }

    /** Timestamp cell as epoch ms, whichever java8API setting the session has. */
    private static long millis(Object value) {
        if (value instanceof Timestamp) {
            return ((Timestamp) value).getTime();
        }
        if (value instanceof Instant) {
            return ((Instant) value).toEpochMilli();
        }
        throw new IllegalArgumentException("not a timestamp: " + (value == null ? "null" : value.getClass()));
    }

    /** One valid copy with its arrival position decoded once. */
    private static final class Copy {
        final Row row;
        final long kafkaMs;
        final int partition;
        final long offset;

        Copy(Row row, long kafkaMs, int partition, long offset) {
            this.row = row;
            this.kafkaMs = kafkaMs;
            this.partition = partition;
            this.offset = offset;
        }
    }

    private static final Comparator<Copy> ARRIVAL = Comparator.<Copy>comparingLong(c -> c.kafkaMs)
            .thenComparingInt(c -> c.partition)
            .thenComparingLong(c -> c.offset);

    @Override
    public scala.collection.Iterator<Row> handleInputRows(
            Long key, scala.collection.Iterator<Row> rows, TimerValues timerValues) {
        List<Row> out = new ArrayList<>();
        List<Copy> copies = new ArrayList<>();
        while (rows.hasNext()) {
            Row row = rows.next();
            if (!row.isNullAt(invalidReasonIdx) || row.isNullAt(orderIdIdx)) {
                out.add(withRepeat(row, false));
            } else {
                copies.add(new Copy(row, millis(row.get(timestampIdx)), row.getInt(partitionIdx), row.getLong(offsetIdx)));
            }
        }
        if (copies.isEmpty()) {
            return asScala(out);
        }
        if (copies.size() > 1) {
            copies.sort(ARRIVAL);
        }
        Long stored = lastArrival.get();
        boolean seen = stored != null;
        long previousMs = seen ? stored : 0L;
        for (Copy copy : copies) {
            out.add(withRepeat(copy.row, seen && copy.kafkaMs - previousMs <= horizonMs));
            previousMs = copy.kafkaMs;
            seen = true;
        }
        lastArrival.update(previousMs); // one state write per order id per batch
        if (stored == null) {
            getHandle().registerTimer(previousMs + horizonMs);
        }
        return asScala(out);
    }

    @Override
    public scala.collection.Iterator<Row> handleExpiredTimer(
            Long key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
        Long stored = lastArrival.get();
        if (stored != null) {
            long keepUntilMs = stored + horizonMs;
            if (timerValues.getCurrentWatermarkInMs() > keepUntilMs) {
                lastArrival.clear();
            } else {
                // A later copy kept the id: look again then (strictly after this watermark).
                getHandle().registerTimer(keepUntilMs + 1);
            }
        }
        return asScala(Collections.emptyList());
    }

    private Row withRepeat(Row row, boolean repeat) {
        Object[] values = new Object[width + 1];
        for (int i = 0; i < width; i++) {
            values[i] = row.get(i);
        }
        values[width] = repeat;
        return RowFactory.create(values);
    }

    private static scala.collection.Iterator<Row> asScala(List<Row> rows) {
        return scala.jdk.javaapi.CollectionConverters.asScala(rows.iterator());
    }
}
