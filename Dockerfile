# numalign with the Kubernetes extras (exporter and extender): slim, non-root.
#   docker build -t numalign:0.1.0 .
# Stage 1 builds the wheel; stage 2 installs it with numalign[kube] into a clean slim image.
# numalign[kube] adds about 266 MiB of site-packages to the base image (no plotting library:
# matplotlib is the report extra); README, "Install sizes", says how that was measured.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir build && python -m build --wheel --outdir /dist

FROM python:3.11-slim
COPY --from=build /dist /dist
RUN pip install --no-cache-dir "$(ls /dist/numalign-*.whl)[kube]" && rm -rf /dist \
    && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin numalign
# the extender and the exporter's metrics; the exporter DaemonSet overrides the user (root
# without capabilities) to read /var/lib/kubelet
USER 65532:65532
EXPOSE 8888 8889 9102
ENTRYPOINT []
CMD ["numalign", "--help"]
