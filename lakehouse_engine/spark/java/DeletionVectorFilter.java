package lakehouse.spark;

import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.DataFrameReader;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.roaringbitmap.RoaringBitmap;

/**
 * Whether a row of a parquet data file is live: false when the file's deletion vector marks the
 * row's position. The vectors (Paimon's bitmaps in the portable RoaringBitmap layout, already
 * checked on the driver) travel to the executors once, in a broadcast, and each executor decodes a
 * file's bitmap the first time one of its rows is asked about, so the rows are filtered inside
 * Spark's own scan with no join.
 */
public final class DeletionVectorFilter implements UDF2<String, Long, Boolean> {
    private static final long serialVersionUID = 1L;

    private final Broadcast<Vectors> vectors;
    // The file of the previous row and its bitmap: a task reads one file's rows in a run. One
    // immutable pair, so a thread never sees one file's name with another's bitmap.
    private transient Previous previous;

    DeletionVectorFilter(Broadcast<Vectors> vectors) {
        this.vectors = vectors;
    }

    @Override
    public Boolean call(String fileName, Long rowIndex) {
        Previous file = previous;
        if (file == null || !file.name.equals(fileName)) {
            file = new Previous(fileName, vectors.value().bitmap(fileName));
            previous = file;
        }
        long row = rowIndex;
        // Paimon's bitmaps hold unsigned 32-bit positions: a row past them is never marked.
        return file.deleted == null || (row >>> 32) != 0 || !file.deleted.contains((int) row);
    }

    /** A data file's name and the bitmap of its deleted rows (null: none). */
    private static final class Previous {
        final String name;
        final RoaringBitmap deleted;

        Previous(String name, RoaringBitmap deleted) {
            this.name = name;
            this.deleted = deleted;
        }
    }

    /**
     * A boolean column, true for the rows no deletion vector marks.
     *
     * @param names the data file names, one per line, in the order of their bitmaps
     * @param sizes each bitmap's size in bytes, a big-endian int32 each
     * @param bitmaps the bitmaps (portable RoaringBitmap layout) one after the other
     * @param fileName the row's data file name (Spark's {@code _metadata.file_name})
     * @param rowIndex the row's position in its file (Spark's {@code _metadata.row_index})
     */
    static Column liveRows(SparkSession spark, String names, byte[] sizes, byte[] bitmaps,
                           Column fileName, Column rowIndex) {
        Vectors vectors = new Vectors(names, sizes, bitmaps);
        Broadcast<Vectors> shipped = JavaSparkContext.fromSparkContext(spark.sparkContext()).broadcast(vectors);
        UserDefinedFunction udf = functions.udf(new DeletionVectorFilter(shipped), DataTypes.BooleanType)
            .withName("lakehouse_live_row");
        return udf.apply(fileName, rowIndex);
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
        Column keep = liveRows(spark, names, sizes, bitmaps, functions.col("_metadata.file_name"),
                               functions.col("_metadata.row_index"));
        if (!valueKind.isEmpty()) {
            Object[] kinds = new Object[keptKinds.length];
            for (int i = 0; i < kinds.length; i++) {
                kinds[i] = keptKinds[i];
            }
            keep = keep.and(files.col(quoted(valueKind)).isin(kinds));
        }
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
