package io.github.revenueplatform.state;

import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessorWithInitialState;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import scala.Tuple2;

/**
 * The streaming app's dedupe, kept in Spark's state store (RocksDB, checkpointed with the query).
 *
 * <p>The rule ({@code spark_apps.contract.records.DEDUPE_RULE}, also applied by the reprocess job and the
 * quality suite): a valid copy of an order is a <em>repeat</em> when the copy of the same
 * {@code order_id} that arrived just before it (arrival order: the micro-batch, then Kafka
 * timestamp, partition, offset) has a Kafka timestamp at most the horizon before its own. Every
 * input row comes out once, unchanged, plus {@code repeat} and {@code conflicting_copy} (booleans, not
 * null): invalid rows (a {@code dlq_reason}) are never either and never touch state. A repeat is a
 * <em>conflicting copy</em> when its content fingerprint (store, type and amount, computed by the caller
 * into {@code _content_fingerprint}, 1 to 2^20 - 1; 0 or null: unknown) differs from that of the copy
 * before it: a forged or broken copy that must not pass silently as a retry (issue 56: a copy at
 * another store for 0.01, sent first, made the real order a repeat). Both are known, or no verdict.
 *
 * <p>State: per order id, the Kafka timestamp (ms) of its last copy and that copy's fingerprint, packed
 * into one long ({@link #pack}: no second state write per id; a value written before fingerprints
 * existed reads as fingerprint 0), in a map keyed by the id
 * inside one of {@link #BUCKETS} buckets (a hash of the id), Spark's grouping key. An id's entry may
 * go once the query's watermark, defined on the Kafka timestamp, is past its last copy plus the
 * horizon: no later copy can be a repeat of it then (one arriving more than the watermark's delay
 * behind the newest record would be, and is not counted as one). Eviction follows Kafka time, not
 * the wall clock, so a stopped app forgets nothing while it is down and a replay of a month keeps
 * about one horizon of ids. A verdict reads the stored time itself, so an entry kept longer never
 * changes one: eviction only bounds the state.
 *
 * <p>Why buckets: Spark's timers are per grouping key, and a timer per id cost two more state writes
 * and a read for every new id (half the operator's time at 500,000-order batches); and a new query's
 * initial state costs Spark a generated deserializer per grouping key (~77 us each: 157 s for 2
 * million ids keyed by id; keyed by bucket, the same 2 million took 16.6 s, mostly their own reads
 * and writes). Each bucket has one event-time timer; when
 * it fires, the bucket's map is scanned, the ids past the horizon leave, and the timer moves to the
 * next id's expiry. A bucket's timer fires only at the instants of its own <em>phase</em>
 * ({@link #dueAt}): one instant per recheck period (a quarter horizon), the buckets' phases spread
 * evenly over the period. So a bucket is scanned at most once a period, an id stays at most 1.25
 * horizons (plus the watermark's delay), each entry is scanned about four times in its life, and a
 * batch scans only the buckets whose phase its watermark passes: at a 2-s batch and a 1-hour horizon,
 * 2/900 of them. Without phases, every bucket got its first id in an app's first seconds and their
 * timers fired together ever after: one batch in every quarter hour scanned all the state and removed
 * a quarter of it (a two-hour soak at 2,000 orders/s: 1,053,992 ids in one batch of 10-35 s). The same
 * holds for the ids of an initial state, which come in no set order: a seed that expires before the
 * bucket's timer fires moves the timer earlier.
 *
 * <p>Spark drops rows behind the watermark before an event-time operator only when its input
 * carries the watermark's column, and no row may be dropped here (bronze keeps every record): the
 * caller defines the watermark on a copy of the Kafka timestamp and drops that copy before this
 * operator ({@code spark_apps.revenue.dedupe.with_repeats}).
 */
public final class OrderRepeats
        extends StatefulProcessorWithInitialState<Long, Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    public static final String REPEAT_COLUMN = "repeat";
    public static final String CONFLICT_COLUMN = "conflicting_copy";
    /** The caller's fingerprint of a copy's content (spark_apps.revenue.dedupe.content_fingerprint). */
    public static final String FINGERPRINT_COLUMN = "_content_fingerprint";
    /**
     * A state value with this bit holds a fingerprint (bits 42-61) and a Kafka time in ms (bits 0-41,
     * 1970 to 2109); any other value is a plain Kafka time in ms with no fingerprint: one written before
     * fingerprints, or a time outside that range (Spark's timestamps stay below 2^53 ms, so a plain time
     * never has this bit; a negative one is below it).
     */
    private static final long PACKED = 1L << 62;
    private static final int TIME_BITS = 42;
    private static final long TIME_MASK = (1L << TIME_BITS) - 1;
    private static final long FINGERPRINT_MASK = (1L << 20) - 1;
    /** Names of the state variables (the state reader and the checkpoint checks use them). */
    public static final String LAST_ARRIVAL_STATE = "order_last_arrival_ms";
    public static final String NEXT_CHECK_STATE = "bucket_next_check_ms";
    /**
     * Grouping keys. Part of the checkpoint's meaning: changing it makes every stored id unreachable.
     * 4,096 keeps a live batch of 20,000 orders at ~5 per group and a bucket's scan small (at 20,000
     * orders/s and a 1-hour horizon, ~18,000 ids, four times an hour).
     */
    public static final int BUCKETS = 4096;
    private static final String BUCKET_COLUMN = "_order_bucket";
    // The columns the operator reads; the others cross it packed ({@link #apply}).
    private static final String ORDER_ID = "order_id";
    private static final String KAFKA_TIMESTAMP = "timestamp";
    private static final String PARTITION = "partition";
    private static final String OFFSET = "offset";
    private static final String INVALID_REASON = "dlq_reason";
    private static final Set<String> READ_COLUMNS =
            Set.of(ORDER_ID, KAFKA_TIMESTAMP, PARTITION, OFFSET, INVALID_REASON, FINGERPRINT_COLUMN);
    private static final String PACKED_COLUMN = "_passed_through";

    private final long horizonMs;
    private final long recheckMs;
    private final int timestampIdx;
    private final int partitionIdx;
    private final int offsetIdx;
    private final int invalidReasonIdx;
    private final int orderIdIdx;
    private final int fingerprintIdx;
    private final int width;

    /** Kafka timestamp (ms) and fingerprint of each order's last copy ({@link #pack}), by order id. Created in init(), on the executor. */
    private transient MapState<Long, Long> lastArrival;
    /** When the bucket's timer fires (ms of watermark); absent when the bucket holds no id. */
    private transient ValueState<Long> nextCheck;

    private OrderRepeats(StructType input, long horizonMs) {
        if (horizonMs < 0) {
            throw new IllegalArgumentException("horizonMs must be >= 0, got " + horizonMs);
        }
        this.horizonMs = horizonMs;
        this.recheckMs = Math.max(1L, horizonMs / 4);
        this.timestampIdx = input.fieldIndex(KAFKA_TIMESTAMP);
        this.partitionIdx = input.fieldIndex(PARTITION);
        this.offsetIdx = input.fieldIndex(OFFSET);
        this.invalidReasonIdx = input.fieldIndex(INVALID_REASON);
        this.orderIdIdx = input.fieldIndex(ORDER_ID);
        this.fingerprintIdx = input.fieldIndex(FINGERPRINT_COLUMN);
        this.width = input.length();
    }

    /** One state value: {@code kafkaMs} and {@code fingerprint} (0: unknown) packed when both fit. */
    static long pack(long kafkaMs, long fingerprint) {
        if (fingerprint <= 0 || fingerprint > FINGERPRINT_MASK || kafkaMs < 0 || kafkaMs > TIME_MASK) {
            return kafkaMs;
        }
        return PACKED | (fingerprint << TIME_BITS) | kafkaMs;
    }

    static long kafkaMs(long stored) {
        return stored >= PACKED ? stored & TIME_MASK : stored;
    }

    static long fingerprint(long stored) {
        return stored >= PACKED ? (stored >>> TIME_BITS) & FINGERPRINT_MASK : 0L;
    }

    /** The bucket of an order id (a long column): a hash, so no choice of ids puts them all in one. */
    public static Column bucket(Column orderId) {
        return functions.pmod(functions.xxhash64(orderId.cast("long")), functions.lit(BUCKETS));
    }

    /**
     * {@code rows} (needs order_id, timestamp, partition, offset, dlq_reason, _content_fingerprint; a
     * watermark on timestamp) with {@code repeat} and {@code conflicting_copy}: the same columns in the
     * same order, then those two. {@code initial}, when not null, is the state a new query starts from:
     * one row per order id of (order_id long, last_arrival_ms long[, last_fingerprint long]).
     *
     * <p>The columns the operator does not read cross it packed into one binary column
     * ({@link RowBytes}): Spark converts the operator's input and output rows to Java {@code Row}s and
     * back, and a byte array costs a copy where line items cost a conversion per field.
     */
    public static Dataset<Row> apply(Dataset<Row> rows, long horizonMs, Dataset<Row> initial) {
        StructType input = rows.schema();
        List<Column> read = new ArrayList<>();
        List<Column> passed = new ArrayList<>();
        StructType passedSchema = new StructType();
        for (StructField field : input.fields()) {
            if (READ_COLUMNS.contains(field.name())) {
                read.add(functions.col(field.name()));
            } else {
                passed.add(functions.col(field.name()));
                passedSchema = passedSchema.add(field);
            }
        }
        if (passed.isEmpty()) {
            return judge(rows, horizonMs, initial);
        }
        read.add(RowBytes.pack(functions.struct(passed.toArray(new Column[0]))).alias(PACKED_COLUMN));
        Dataset<Row> judged = judge(rows.select(read.toArray(new Column[0])), horizonMs, initial);
        Column unpacked = RowBytes.unpack(functions.col(PACKED_COLUMN), passedSchema);
        List<Column> restored = new ArrayList<>();
        for (StructField field : input.fields()) {
            restored.add(READ_COLUMNS.contains(field.name())
                    ? functions.col(field.name())
                    : unpacked.getField(field.name()).alias(field.name()));
        }
        restored.add(functions.col(REPEAT_COLUMN));
        restored.add(functions.col(CONFLICT_COLUMN));
        return judged.select(restored.toArray(new Column[0]));
    }

    private static Dataset<Row> judge(Dataset<Row> rows, long horizonMs, Dataset<Row> initial) {
        StructType input = rows.schema();
        Encoder<Row> output = Encoders.row(input.add(REPEAT_COLUMN, DataTypes.BooleanType, false)
                .add(CONFLICT_COLUMN, DataTypes.BooleanType, false));
        // The key is a column, not a function of the row: a key function would make Spark turn every
        // row into a Java Row once more just to compute it. An invalid row never touches state, so
        // its bucket only spreads it; the column is last, so the rows' fields keep their positions.
        Column valid = functions.col(INVALID_REASON).isNull().and(functions.col(ORDER_ID).isNotNull());
        Column key = functions.when(valid, bucket(functions.col(ORDER_ID)))
                .otherwise(functions.pmod(functions.col(OFFSET), functions.lit(BUCKETS)));
        KeyValueGroupedDataset<Long, Row> byBucket = rows.withColumn(BUCKET_COLUMN, key)
                .groupBy(functions.col(BUCKET_COLUMN))
                .as(Encoders.LONG(), Encoders.row(input.add(BUCKET_COLUMN, DataTypes.LongType, true)));
        OrderRepeats processor = new OrderRepeats(input, horizonMs);
        if (initial == null) {
            return byBucket.transformWithState(processor, TimeMode.EventTime(), OutputMode.Append(), output);
        }
        Column lastFingerprint = Set.of(initial.columns()).contains("last_fingerprint")
                ? functions.coalesce(functions.col("last_fingerprint").cast("long"), functions.lit(0L))
                : functions.lit(0L);
        Dataset<Row> seeds = initial.select(
                functions.col("order_id").cast("long").alias("order_id"),
                functions.col("last_arrival_ms").cast("long").alias("last_arrival_ms"),
                lastFingerprint.alias("last_fingerprint"),
                bucket(functions.col("order_id")).alias(BUCKET_COLUMN));
        Encoder<Row> seed = Encoders.row(seeds.schema());
        KeyValueGroupedDataset<Long, Row> initialState =
                seeds.groupBy(functions.col(BUCKET_COLUMN)).as(Encoders.LONG(), seed);
        return byBucket.transformWithState(
                processor, TimeMode.EventTime(), OutputMode.Append(), initialState, output, seed);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        lastArrival = getHandle().getMapState(
                LAST_ARRIVAL_STATE, Encoders.LONG(), Encoders.LONG(), TTLConfig.NONE());
        nextCheck = getHandle().getValueState(NEXT_CHECK_STATE, Encoders.LONG(), TTLConfig.NONE());
    }

    @Override
    public void handleInitialState(Long bucket, Row seed, TimerValues timerValues) {
        long orderId = seed.getLong(0);
        long lastMs = seed.getLong(1);
        Long stored = lastArrival.getValue(orderId);
        if (stored == null || kafkaMs(stored) < lastMs) {
            lastArrival.updateValue(orderId, pack(lastMs, seed.getLong(2)));
        }
        watch(bucket, lastMs + horizonMs);
    }

    /**
     * The first instant at or after {@code atMs} at which {@code bucket}'s timer may fire: the instants
     * congruent to the bucket's phase modulo the recheck period, the phases of the {@link #BUCKETS}
     * buckets evenly spread over the period (bucket b at b/BUCKETS of it).
     */
    static long dueAt(long bucket, long atMs, long recheckMs) {
        long b = Math.floorMod(bucket, (long) BUCKETS);
        // b * recheckMs / BUCKETS without overflowing for any horizon.
        long phase = (recheckMs / BUCKETS) * b + (recheckMs % BUCKETS) * b / BUCKETS;
        return atMs + Math.floorMod(phase - atMs, recheckMs);
    }

    /**
     * Make sure the bucket's timer fires by the first instant of its phase after an id kept until
     * {@code keepUntilMs} may go: set it when the bucket has none, and move it earlier when this id may
     * go before it fires: the seeds of an initial state come in no set order. Live traffic seldom
     * moves it, as a new copy expires after the copies that arrived before it (only a copy with an
     * older Kafka timestamp can).
     */
    private void watch(long bucket, long keepUntilMs) {
        long due = dueAt(bucket, keepUntilMs + 1, recheckMs);
        Long scheduled = nextCheck.exists() ? nextCheck.get() : null;
        if (scheduled != null && scheduled <= due) {
            return;
        }
        if (scheduled != null) {
            getHandle().deleteTimer(scheduled);
        }
        getHandle().registerTimer(due);
        nextCheck.update(due);
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

    /** One valid copy with its id and arrival position decoded once. */
    private static final class Copy {
        final Row row;
        final long orderId;
        final long kafkaMs;
        final int partition;
        final long offset;
        final long fingerprint;

        Copy(Row row, long orderId, long kafkaMs, int partition, long offset, long fingerprint) {
            this.row = row;
            this.orderId = orderId;
            this.kafkaMs = kafkaMs;
            this.partition = partition;
            this.offset = offset;
            this.fingerprint = fingerprint;
        }
    }

    private static final Comparator<Copy> BY_ID_IN_ARRIVAL = Comparator.<Copy>comparingLong(c -> c.orderId)
            .thenComparingLong(c -> c.kafkaMs)
            .thenComparingInt(c -> c.partition)
            .thenComparingLong(c -> c.offset);

    @Override
    public scala.collection.Iterator<Row> handleInputRows(
            Long bucket, scala.collection.Iterator<Row> rows, TimerValues timerValues) {
        List<Row> out = new ArrayList<>();
        List<Copy> copies = new ArrayList<>();
        while (rows.hasNext()) {
            Row row = rows.next();
            if (!row.isNullAt(invalidReasonIdx) || row.isNullAt(orderIdIdx)) {
                out.add(withVerdict(row, false, false));
            } else {
                copies.add(new Copy(
                        row,
                        ((Number) row.get(orderIdIdx)).longValue(),
                        millis(row.get(timestampIdx)),
                        row.getInt(partitionIdx),
                        row.getLong(offsetIdx),
                        row.isNullAt(fingerprintIdx) ? 0L : ((Number) row.get(fingerprintIdx)).longValue()));
            }
        }
        if (copies.isEmpty()) {
            return asScala(out);
        }
        if (copies.size() > 1) {
            copies.sort(BY_ID_IN_ARRIVAL);
        }
        long earliestKeepUntil = Long.MAX_VALUE;
        int i = 0;
        while (i < copies.size()) {
            long orderId = copies.get(i).orderId;
            Long stored = lastArrival.getValue(orderId);
            boolean seen = stored != null;
            long previousMs = seen ? kafkaMs(stored) : 0L;
            long previousFingerprint = seen ? fingerprint(stored) : 0L;
            for (; i < copies.size() && copies.get(i).orderId == orderId; i++) {
                Copy copy = copies.get(i);
                boolean repeat = seen && copy.kafkaMs - previousMs <= horizonMs;
                boolean conflicting = repeat && previousFingerprint != 0 && copy.fingerprint != 0
                        && copy.fingerprint != previousFingerprint;
                out.add(withVerdict(copy.row, repeat, conflicting));
                previousMs = copy.kafkaMs;
                previousFingerprint = copy.fingerprint;
                seen = true;
            }
            // One state write per order id per batch.
            lastArrival.updateValue(orderId, pack(previousMs, previousFingerprint));
            earliestKeepUntil = Math.min(earliestKeepUntil, previousMs + horizonMs);
        }
        watch(bucket, earliestKeepUntil);
        return asScala(out);
    }

    @Override
    public scala.collection.Iterator<Row> handleExpiredTimer(
            Long bucket, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
        long watermarkMs = timerValues.getCurrentWatermarkInMs();
        List<Long> gone = new ArrayList<>();
        long earliestKeepUntil = Long.MAX_VALUE;
        scala.collection.Iterator<Tuple2<Long, Long>> entries = lastArrival.iterator();
        while (entries.hasNext()) {
            Tuple2<Long, Long> entry = entries.next();
            long keepUntilMs = kafkaMs(entry._2()) + horizonMs;
            if (watermarkMs > keepUntilMs) {
                gone.add(entry._1());
            } else {
                earliestKeepUntil = Math.min(earliestKeepUntil, keepUntilMs);
            }
        }
        for (Long orderId : gone) {
            lastArrival.removeKey(orderId);
        }
        if (earliestKeepUntil == Long.MAX_VALUE) {
            nextCheck.clear();
        } else {
            // The next instant of the bucket's phase once the earliest id left may go: strictly after
            // this watermark (no id left is past it), at most one scan a recheck period whatever the
            // spread of the bucket's ids, and never in step with the other buckets.
            long next = dueAt(bucket, earliestKeepUntil + 1, recheckMs);
            getHandle().registerTimer(next);
            nextCheck.update(next);
        }
        return asScala(new ArrayList<Row>());
    }

    private Row withVerdict(Row row, boolean repeat, boolean conflicting) {
        Object[] values = new Object[width + 2];
        for (int i = 0; i < width; i++) {
            values[i] = row.get(i);
        }
        values[width] = repeat;
        values[width + 1] = conflicting;
        return RowFactory.create(values);
    }

    private static scala.collection.Iterator<Row> asScala(List<Row> rows) {
        return scala.jdk.javaapi.CollectionConverters.asScala(rows.iterator());
    }
}
