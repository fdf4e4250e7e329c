package lakehouse.spark;

import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.hadoop.fs.FileStatus;

import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.DataFrameReader;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.api.java.UDF3;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.roaringbitmap.RoaringBitmap;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Whether a row of a parquet data file is live: false when the file's deletion vector marks the
 * row's position. The vectors (Paimon's bitmaps in the portable RoaringBitmap layout, already
 * checked on the driver) travel to the executors once, in a broadcast, and each executor decodes a
 * file's bitmap the first time one of its rows is asked about, so the rows are filtered inside
 * Spark's own scan with no join.
 */
public final class DeletionVectorFilter implements UDF2<String, Long, Boolean> {
    private static final long serialVersionUID = 1L;
    /** The name the filter has in Spark's plans. */
    static final String NAME = "lakehouse_live_row";

    private final Broadcast<Vectors> vectors;
    // The file of the previous row and its bitmap: a task reads one file's rows in a run. One
    // immutable pair, so a thread never sees one file's name with another's bitmap.
    private transient Last<String> previous;

    DeletionVectorFilter(Broadcast<Vectors> vectors) {
        this.vectors = vectors;
    }

    @Override
    public Boolean call(String fileName, Long rowIndex) {
        Last<String> file = previous;
        if (file == null || !file.key.equals(fileName)) {
            file = new Last<>(fileName, vectors.value().bitmap(fileName));
            previous = file;
        }
        return !marked(file.deleted, rowIndex);
    }

    /** The file of the previous row (by name or by size) and the bitmap of its deleted rows (null: none). */
    private static final class Last<K> {
        final K key;
        final RoaringBitmap deleted;

        Last(K key, RoaringBitmap deleted) {
            this.key = key;
            this.deleted = deleted;
        }
    }

    /**
     * A boolean column, true for the rows no deletion vector marks (and, with {@code kind}, whose
     * row kind is one of {@code keptKinds}: one UDF call per row checks both, which costs Spark
     * less than the UDF and a separate {@code isin} on the kind).
     *
     * @param vectors the vectors of the read's files
     * @param bySize each marked file's name by its size in bytes, when the scan's listing shows
     *     every marked file's size held by no other file of the scan (null otherwise): then rows
     *     are matched to their file by {@code _metadata.file_size}, a long, instead of
     *     {@code _metadata.file_name}, whose conversion to a Java string per row is most of the
     *     filter's cost
     * @param kind the row kind column, or null for no check of it
     * @param keptKinds the row kinds kept
     */
    static Column liveRows(SparkSession spark, Vectors vectors, Map<Long, String> bySize, Column kind,
                           byte[] keptKinds) {
        Broadcast<Vectors> shipped = JavaSparkContext.fromSparkContext(spark.sparkContext()).broadcast(vectors);
        Column rowIndex = functions.col("_metadata.row_index");
        if (bySize != null) {
            return live(new BySize(shipped, bySize), functions.col("_metadata.file_size"), rowIndex, kind, keptKinds);
        }
        return live(new DeletionVectorFilter(shipped), functions.col("_metadata.file_name"), rowIndex, kind,
                    keptKinds);
    }

    private static <K> Column live(UDF2<K, Long, Boolean> filter, Column file, Column rowIndex, Column kind,
                                   byte[] keptKinds) {
        if (kind == null) {
            return functions.udf(filter, DataTypes.BooleanType).withName(NAME).apply(file, rowIndex);
        }
        return functions.udf(new WithKind<>(filter, keptKinds), DataTypes.BooleanType).withName(NAME)
            .apply(file, rowIndex, kind);
    }

    /** The filter with the row kind checked first: a row of another kind (or none) is dropped. */
    static final class WithKind<K> implements UDF3<K, Long, Byte, Boolean> {
        private static final long serialVersionUID = 1L;

        private final UDF2<K, Long, Boolean> filter;
        private final byte[] kept;

        WithKind(UDF2<K, Long, Boolean> filter, byte[] kept) {
            this.filter = filter;
            this.kept = kept.clone();
        }

        @Override
        public Boolean call(K file, Long rowIndex, Byte kind) throws Exception {
            if (kind == null) {
                return false;
            }
            byte value = kind;
            for (byte k : kept) {
                if (k == value) {
                    return filter.call(file, rowIndex);
                }
            }
            return false;
        }
    }

    /** Whether a file's bitmap (null: no vector) marks a row position. */
    static boolean marked(RoaringBitmap deleted, long row) {
        // Paimon's bitmaps hold unsigned 32-bit positions: a row past them is never marked.
        return deleted != null && (row >>> 32) == 0 && deleted.contains((int) row);
    }

    /**
     * The filter keyed by the row's file size ({@code _metadata.file_size}) instead of its name:
     * exact when the scan's own listing gives each marked file a size no other file of the scan
     * has ({@link #uniqueSizes}).
     */
    static final class BySize implements UDF2<Long, Long, Boolean> {
        private static final long serialVersionUID = 1L;

        private final Broadcast<Vectors> vectors;
        private final HashMap<Long, String> names;
        private transient Last<Long> previous;

        BySize(Broadcast<Vectors> vectors, Map<Long, String> names) {
            this.vectors = vectors;
            this.names = new HashMap<>(names);
        }

        @Override
        public Boolean call(Long fileSize, Long rowIndex) {
            Last<Long> file = previous;
            if (file == null || !file.key.equals(fileSize)) {
                String name = names.get(fileSize);
                file = new Last<>(fileSize, name == null ? null : vectors.value().bitmap(name));
                previous = file;
            }
            return !marked(file.deleted, rowIndex);
        }
    }

    /**
     * Each marked file's name by its size, from the listing the scan reads ({@code files}' file
     * index, whose statuses give {@code _metadata.file_size}); null unless every marked file is
     * listed once and no other listed file has its size.
     */
    static Map<Long, String> uniqueSizes(Dataset<Row> files, Vectors vectors) {
        LogicalPlan plan = files.queryExecution().analyzed();
        if (!(plan instanceof LogicalRelation relation) || !(relation.relation() instanceof HadoopFsRelation fs)
                || !(fs.location() instanceof PartitioningAwareFileIndex index)) {
            return null;
        }
        Map<Long, Integer> filesOfSize = new HashMap<>();
        Map<Long, String> bySize = new HashMap<>();
        int listed = 0;
        for (FileStatus status : CollectionConverters.asJava(index.allFiles())) {
            filesOfSize.merge(status.getLen(), 1, Integer::sum);
            String name = status.getPath().getName();
            if (vectors.has(name)) {
                bySize.put(status.getLen(), name);
                listed++;
            }
        }
        if (listed != vectors.size() || bySize.size() != listed) {
            return null;
        }
        for (Long size : bySize.keySet()) {
            if (filesOfSize.get(size) != 1) {
                return null;
            }
        }
        return bySize;
    }

    /**
     * The rows of parquet data files less the rows the vectors mark, built in one call (each call
     * from Python costs a round trip, and each step of a Dataset an analysis).
     *
     * @param paths the files, one per line, as Spark's Hadoop filesystems name them
     * @param schemaJson the columns to read from the files (a StructType as JSON)
     * @param options the reader's options, one key and one value per line (key, value, key, ...)
     * @param columns the columns to return, one per line
     * @param valueKind a column whose values must be one of {@code keptKinds}, or "" for none
     * @param keptKinds the values of {@code valueKind} that are kept (int8 each)
     * @param names the data file names with vectors, one per line ({@link #liveRows})
     * @param sizes each bitmap's size in bytes, a big-endian int32 each
     * @param bitmaps the bitmaps one after the other
     */
    public static Dataset<Row> scan(SparkSession spark, String paths, String schemaJson, String options,
                                    String columns, String valueKind, byte[] keptKinds, String names,
                                    byte[] sizes, byte[] bitmaps) {
        DataFrameReader reader = spark.read().schema((StructType) DataType.fromJson(schemaJson));
        String[] settings = options.isEmpty() ? new String[0] : options.split("\n", -1);
        for (int i = 0; i + 1 < settings.length; i += 2) {
            reader = reader.option(settings[i], settings[i + 1]);
        }
        Dataset<Row> files = reader.parquet(paths.split("\n", -1));
        Vectors vectors = new Vectors(names, sizes, bitmaps);
        Column kind = valueKind.isEmpty() ? null : files.col(quoted(valueKind));
        Column keep = liveRows(spark, vectors, uniqueSizes(files, vectors), kind, keptKinds);
        String[] returned = columns.split("\n", -1);
        Column[] selected = new Column[returned.length];
        for (int i = 0; i < selected.length; i++) {
            selected[i] = files.col(quoted(returned[i]));
        }
        return files.where(keep).select(selected);
    }

    /** A column name as Spark's parser takes it literally (dots and backticks included). */
    private static String quoted(String name) {
        return "`" + name.replace("`", "``") + "`";
    }

    /** The vectors of one read: per data file name, its bitmap's bytes; decoded once per executor. */
    static final class Vectors implements Serializable {
        private static final long serialVersionUID = 1L;

        private final Map<String, int[]> ranges = new HashMap<>();
        private final byte[] bitmaps;
        private transient ConcurrentHashMap<String, RoaringBitmap> decoded;

        Vectors(String names, byte[] sizes, byte[] bitmaps) {
            String[] files = names.isEmpty() ? new String[0] : names.split("\n", -1);
            ByteBuffer lengths = ByteBuffer.wrap(sizes).order(ByteOrder.BIG_ENDIAN);
            if (sizes.length != 4 * files.length) {
                throw new IllegalArgumentException(files.length + " file names but " + sizes.length / 4 + " sizes");
            }
            int offset = 0;
            for (String file : files) {
                int size = lengths.getInt();
                ranges.put(file, new int[] {offset, size});
                offset += size;
            }
            if (offset != bitmaps.length) {
                throw new IllegalArgumentException("sizes add up to " + offset + " bytes, not " + bitmaps.length);
            }
            this.bitmaps = bitmaps;
        }

        /** Whether a data file has a vector. */
        boolean has(String fileName) {
            return ranges.containsKey(fileName);
        }

        /** How many data files have vectors. */
        int size() {
            return ranges.size();
        }

        /** The bitmap of a data file's deleted positions, or null when the file has no vector. */
        RoaringBitmap bitmap(String fileName) {
            int[] range = ranges.get(fileName);
            if (range == null) {
                return null;
            }
            synchronized (this) {
                if (decoded == null) {
                    decoded = new ConcurrentHashMap<>();
                }
            }
            return decoded.computeIfAbsent(fileName, f -> decode(f, range));
        }

        private RoaringBitmap decode(String fileName, int[] range) {
            RoaringBitmap bitmap = new RoaringBitmap();
            try {
                bitmap.deserialize(ByteBuffer.wrap(bitmaps, range[0], range[1]).slice());
            } catch (IOException | RuntimeException e) {
                throw new IllegalStateException("the deletion vector of data file " + fileName
                    + " is not a RoaringBitmap", e);
            }
            return bitmap;
        }
    }
}
