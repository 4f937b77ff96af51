package dev.ortserve.hub;

import dev.ortserve.engine.load.ModelFiles;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;

/** Run by {@link HubModelResolverTest} as a second JVM sharing the cache: resolves a Hub model and prints the snapshot directory. */
public final class ResolveInAnotherProcess {

    public static void main(String[] args) {
        HubSettings settings = new HubSettings(java.net.URI.create(args[0]), Path.of(args[1]), Optional.empty(), false,
                Duration.ofSeconds(30), Duration.ofSeconds(5), 3, Duration.ofMillis(50));
        HubRepoId id = HubRepoId.parse(args[2]).orElseThrow();
        HubModelResolver.Resolved r = new HubModelResolver(settings)
                .resolve(id, files -> ModelFiles.servingFiles(files, Optional.empty(), "Hub model " + id));
        System.out.println("RESOLVED " + r.directory() + " downloaded " + r.downloaded());
    }
}
