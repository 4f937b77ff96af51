package dev.ortserve.api.resource;

import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.generated.ModelsApi;
import dev.ortserve.wire.model.Model;
import dev.ortserve.wire.model.ModelList;
import dev.ortserve.wire.model.ModelStatus;
import dev.ortserve.service.ModelCatalog;
import dev.ortserve.service.ServedModelInfo;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Response;

public class ModelsResource implements ModelsApi {

    @Inject
    ModelCatalog catalog;

    @Override
    public Uni<Response> listModels() {
        ModelList list = new ModelList()._object(ModelList.ObjectEnum.LIST)
                .data(catalog.models().stream().map(ModelsResource::toDto).toList());
        return Uni.createFrom().item(Response.ok(list).build());
    }

    @Override
    public Uni<Response> retrieveModel(String model) {
        return Uni.createFrom().item(() -> catalog.models().stream()
                .filter(m -> m.id().equals(model) || m.aliases().contains(model))
                .findFirst()
                .map(m -> Response.ok(toDto(m)).build())
                .orElseThrow(() -> ApiException.modelNotFound(model)));
    }

    private static Model toDto(ServedModelInfo info) {
        return new Model().id(info.id())._object(Model.ObjectEnum.MODEL).created(info.createdEpochSeconds())
                .ownedBy("ortserve").maxModelLen(info.maxModelLen() > 0 ? info.maxModelLen() : null).root(info.root()).parent(info.parent())
                .parsers(info.toolCallParser() == null ? null
                        : new dev.ortserve.wire.model.ModelParsers().toolCall(info.toolCallParser()).reasoning(info.reasoningParser()))
                .aliases(info.aliases()).pinned(info.pinned()).status(status(info))
                .inputModalities(info.inputModalities() == null ? null : info.inputModalities().stream().map(Model.InputModalitiesEnum::fromValue).toList());
    }

    static ModelStatus status(ServedModelInfo info) {
        return new ModelStatus().value(ModelStatus.ValueEnum.fromValue(info.state())).error(info.error());
    }
}
