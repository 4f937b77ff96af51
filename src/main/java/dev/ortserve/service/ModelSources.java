package dev.ortserve.service;

import dev.ortserve.engine.load.ModelFiles;
import dev.ortserve.engine.ModelLoadException;
import dev.ortserve.hub.HubException;
import dev.ortserve.hub.HubModelResolver;
import dev.ortserve.hub.HubRepoId;
import dev.ortserve.hub.HubSettings;
import jakarta.enterprise.context.ApplicationScoped;
import org.eclipse.microprofile.config.ConfigProvider;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Turns a configured model (ORTSERVE_MODEL_PATH, ORTSERVE_EMBEDDING_MODEL_PATH) into a directory
 * to load: a local directory as it is, a Hub id through the Hugging Face cache (fetching only the
 * files {@link ModelFiles} says serving needs).
 */
@ApplicationScoped
public class ModelSources {

    /**
     * @param directory the directory to load
     * @param source    where it came from, for the logs and /v1/models: the path, or owner/name@commit
     * @param defaultId the model id when none is configured: the directory's name, or the Hub id
     */
    public record Located(Path directory, String source, String defaultId) { }

    /** The id a model gets when none is configured, without fetching anything: the directory's name, or the Hub id's repository. */
    public String defaultId(String spec) {
        Path local = Path.of(spec);
        if (Files.isDirectory(local)) return local.toAbsolutePath().normalize().getFileName().toString();
        return HubRepoId.parse(spec).map(HubRepoId::repo).orElse(spec);
    }

    public Located locate(String spec, Optional<String> revision, Optional<String> modelFile) {
        Path local = Path.of(spec);
        if (Files.isDirectory(local)) {
            Path dir = local.toAbsolutePath().normalize();
            return new Located(local, dir.toString(), dir.getFileName().toString());
        }
        Optional<HubRepoId> parsed = HubRepoId.parse(spec);
        if (parsed.isEmpty()) {
            throw new ModelLoadException("Model directory " + spec + " does not exist or is not a directory (nor a Hub id such as owner/name)");
        }
        HubRepoId id = parsed.get();
        if (!spec.contains("@") && revision.isPresent()) id = id.withRevision(revision.get());
        HubRepoId hubId = id;
        try {
            HubModelResolver.Resolved resolved = new HubModelResolver(hubSettings())
                    .resolve(hubId, files -> ModelFiles.servingFiles(files, modelFile, "Hub model " + hubId));
            return new Located(resolved.directory(), resolved.source(), hubId.repo());
        } catch (HubException e) {
            throw new ModelLoadException(e.getMessage() + (Files.exists(local.getParent() == null ? local : local.getParent())
                    ? " (" + spec + " is not a local directory either)" : ""), e);
        }
    }

    /** The Hub settings from the variables huggingface_hub reads (HF_ENDPOINT, HF_HUB_CACHE, HF_HOME, HF_TOKEN, HF_HUB_OFFLINE). */
    static HubSettings hubSettings() {
        var config = ConfigProvider.getConfig();
        return HubSettings.from(name -> config.getOptionalValue(name, String.class).filter(v -> !v.isBlank()));
    }
}
