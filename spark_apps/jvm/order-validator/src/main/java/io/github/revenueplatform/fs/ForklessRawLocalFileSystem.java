package io.github.revenueplatform.fs;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system without a process per call where Java can do the same itself.
 *
 * <p>Without Hadoop's native library (pyspark ships none) {@link RawLocalFileSystem} runs a shell
 * command for two calls Spark and Delta make on every checkpoint and log file: {@code chmod} in
 * {@link #setPermission} (each file and its {@code .crc}, on create) and {@code readlink} in
 * {@link #getFileLinkStatus} (each rename through {@code FileContext} asks it of the source, the
 * target and their checksum files). A live batch of the streaming app wrote ~67 such processes
 * (offsets, commit, Delta commit and checksum, state changelogs), ~3-4 ms each on this project's
 * 2-core machine and more when the cores are busy; this class makes both calls in Java.
 *
 * <p>Semantics are Hadoop's: a path that is not a symbolic link gets {@link #getFileStatus} (what
 * Hadoop returns once {@code readlink} found no link; a missing path throws the same
 * FileNotFoundException), and a real link, or a mode Java cannot set (sticky and set-id bits, a
 * file system without POSIX permissions), is left to Hadoop's own code.
 */
public class ForklessRawLocalFileSystem extends RawLocalFileSystem {

    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
        if (Files.isSymbolicLink(pathToFile(f).toPath())) {
            return super.getFileLinkStatus(f);
        }
        return getFileStatus(f);
    }

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
        short mode = permission.toShort();
        if ((mode & ~0777) != 0) {
            super.setPermission(p, permission);
            return;
        }
        try {
            Files.setPosixFilePermissions(pathToFile(p).toPath(), posix(mode));
        } catch (UnsupportedOperationException notPosix) {
            super.setPermission(p, permission);
        }
    }

    /** The nine rwx bits of {@code mode} as Java's permission set. */
    static Set<PosixFilePermission> posix(int mode) {
        Set<PosixFilePermission> permissions = EnumSet.noneOf(PosixFilePermission.class);
        PosixFilePermission[] byBit = {
            PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
            PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
            PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
        };
        for (int bit = 0; bit < byBit.length; bit++) {
            if ((mode & (1 << bit)) != 0) {
                permissions.add(byBit[bit]);
            }
        }
        return permissions;
    }
}
