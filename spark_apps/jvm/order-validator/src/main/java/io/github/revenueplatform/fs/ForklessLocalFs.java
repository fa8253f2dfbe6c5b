package io.github.revenueplatform.fs;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * {@code FileContext}'s {@code file:} file system ({@code fs.AbstractFileSystem.file.impl}): Hadoop's
 * {@code LocalFs} (checksummed, over {@code RawLocalFs}) on {@link ForklessRawLocalFileSystem}
 * instead of {@code RawLocalFileSystem}. Spark's checkpoint files (offsets, commits, state
 * changelogs) and Delta's log on a local lake are written and renamed through it.
 */
public class ForklessLocalFs extends ChecksumFs {

    /**
     * As Hadoop's {@code LocalFs(URI, Configuration)}: the URI asked for is not kept, the local file
     * system's is ({@code file:///}), so a path naming a host is refused as Hadoop refuses it.
     */
    public ForklessLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(new Raw(FsConstants.LOCAL_FS_URI, conf));
    }

    /** Hadoop's {@code RawLocalFs} with the file system above in it. */
    static final class Raw extends DelegateToFileSystem {
        Raw(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(uri, new ForklessRawLocalFileSystem(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
        }

        @Override
        public int getUriDefaultPort() {
            return -1; // no port, as RawLocalFs
        }

        @Override
        public FsServerDefaults getServerDefaults(Path f) throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        @Deprecated
        public FsServerDefaults getServerDefaults() throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        public boolean isValidName(String src) {
            return true; // any name is valid on a local file system, as RawLocalFs
        }
    }
}
