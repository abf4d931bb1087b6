"""Vendored, minimal JSON schemas for the custom resources the manifests use (kubernetes-validate has
none: it only warns "Couldn't find schema" for them).

Each schema is a SUBSET of the upstream CRD: every field name, enum and pattern below is upstream's,
and objects are closed (``additionalProperties: false``), so a manifest may only use fields listed
here; to use another one, add it after checking the upstream type. Upstream sources:

* ServiceMonitor, PodMonitor, PrometheusRule (``monitoring.coreos.com/v1``): prometheus-operator,
  ``pkg/apis/monitoring/v1/{servicemonitor,podmonitor,prometheusrule}_types.go`` and the Endpoint /
  RelabelConfig types (``example/prometheus-operator-crd/monitoring.coreos.com_*.yaml`` are generated
  from them); Duration pattern from the same package.
* SparkApplication (``sparkoperator.k8s.io/v1beta2``): kubeflow/spark-operator,
  ``api/v1beta2/sparkapplication_types.go`` (SparkApplicationSpec, SparkPodSpec, DriverSpec,
  ExecutorSpec, RestartPolicy; ``config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml``).
  The Kubernetes types it embeds (affinity, security contexts, volumes, volume mounts) are not
  repeated here: test_render.py validates them strictly as the pod the operator builds.
* The scrape endpoints' ``tlsConfig`` (``monitoring.coreos.com/v1``): prometheus-operator's
  SafeTLSConfig and SecretOrConfigMap (``pkg/apis/monitoring/v1/types.go``).
* Issuer and Certificate (``cert-manager.io/v1``): cert-manager, ``pkg/apis/certmanager/v1/
  types_issuer.go`` (IssuerConfig: SelfSignedIssuer, CAIssuer) and ``types_certificate.go``
  (CertificateSpec, CertificatePrivateKey, CertificateAdditionalOutputFormat; the KeyUsage enum
  of ``types.go``), ``pkg/apis/meta/v1`` (ObjectReference). Go durations
  (``time.ParseDuration``). The objects cert-manager reads are checked beyond their shape by
  test_tls.py (issuer chain, names).
"""

from __future__ import annotations

from typing import Any, Final

Schema = dict[str, Any]

_DURATION: Final = (
    "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)
_STRING_MAP: Final[Schema] = {"type": "object", "additionalProperties": {"type": "string"}}
_STRINGS: Final[Schema] = {"type": "array", "items": {"type": "string"}}
_DNS_NAME: Final = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def _closed(properties: Schema, required: tuple[str, ...] = ()) -> Schema:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": list(required),
        "properties": properties,
    }


_METADATA: Final = _closed(
    {
        "name": {"type": "string", "pattern": _DNS_NAME, "maxLength": 253},
        "namespace": {"type": "string"},
        "labels": _STRING_MAP,
        "annotations": _STRING_MAP,
    },
    ("name",),
)
_LABEL_SELECTOR: Final = _closed(
    {
        "matchLabels": _STRING_MAP,
        "matchExpressions": {
            "type": "array",
            "items": _closed(
                {
                    "key": {"type": "string"},
                    "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                    "values": _STRINGS,
                },
                ("key", "operator"),
            ),
        },
    }
)
_NAMESPACE_SELECTOR: Final = _closed({"any": {"type": "boolean"}, "matchNames": _STRINGS})
_RELABEL: Final = _closed(
    {
        "sourceLabels": {"type": "array", "items": {"type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"}},
        "separator": {"type": "string"},
        "targetLabel": {"type": "string"},
        "regex": {"type": "string"},
        "modulus": {"type": "integer"},
        "replacement": {"type": "string"},
        "action": {
            "enum": [
                "replace", "Replace", "keep", "Keep", "drop", "Drop", "hashmod", "HashMod",
                "labelmap", "LabelMap", "labeldrop", "LabelDrop", "labelkeep", "LabelKeep",
                "lowercase", "Lowercase", "uppercase", "Uppercase", "keepequal", "KeepEqual",
                "dropequal", "DropEqual",
            ]
        },
    }
)  # fmt: skip
_KEY_SELECTOR: Final = _closed(
    {
        "name": {"type": "string", "minLength": 1},
        "key": {"type": "string", "minLength": 1},
        "optional": {"type": "boolean"},
    },
    ("key",),
)
_SECRET_OR_CONFIG_MAP: Final = {
    **_closed({"secret": _KEY_SELECTOR, "configMap": _KEY_SELECTOR}),
    "maxProperties": 1,
}
_TLS_VERSION: Final = {"enum": ["TLS10", "TLS11", "TLS12", "TLS13"]}
_TLS_CONFIG: Final = _closed(
    {
        "ca": _SECRET_OR_CONFIG_MAP,
        "cert": _SECRET_OR_CONFIG_MAP,
        "keySecret": _KEY_SELECTOR,
        "serverName": {"type": "string"},
        "insecureSkipVerify": {"type": "boolean"},
        "minVersion": _TLS_VERSION,
        "maxVersion": _TLS_VERSION,
    }
)
_SCRAPE_ENDPOINT_COMMON: Final[Schema] = {
    "tlsConfig": _TLS_CONFIG,
    "path": {"type": "string", "pattern": "^/"},
    "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
    "params": {"type": "object", "additionalProperties": _STRINGS},
    "interval": {"type": "string", "pattern": _DURATION},
    "scrapeTimeout": {"type": "string", "pattern": _DURATION},
    "honorLabels": {"type": "boolean"},
    "honorTimestamps": {"type": "boolean"},
    "relabelings": {"type": "array", "items": _RELABEL},
    "metricRelabelings": {"type": "array", "items": _RELABEL},
}
_MONITOR_COMMON: Final[Schema] = {
    "jobLabel": {"type": "string"},
    "podTargetLabels": _STRINGS,
    "selector": _LABEL_SELECTOR,
    "namespaceSelector": _NAMESPACE_SELECTOR,
    "sampleLimit": {"type": "integer", "minimum": 0},
    "targetLimit": {"type": "integer", "minimum": 0},
    "scrapeClass": {"type": "string", "minLength": 1},
}


def _root(api_version: str, kind: str, spec: Schema) -> Schema:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **_closed(
            {
                "apiVersion": {"const": api_version},
                "kind": {"const": kind},
                "metadata": _METADATA,
                "spec": spec,
            },
            ("apiVersion", "kind", "metadata", "spec"),
        ),
    }


SERVICE_MONITOR: Final = _root(
    "monitoring.coreos.com/v1",
    "ServiceMonitor",
    _closed(
        {
            **_MONITOR_COMMON,
            "targetLabels": _STRINGS,
            "endpoints": {
                "type": "array",
                "minItems": 1,
                "items": _closed({**_SCRAPE_ENDPOINT_COMMON, "port": {"type": "string"}, "targetPort": {}}),
            },
        },
        ("selector", "endpoints"),
    ),
)

POD_MONITOR: Final = _root(
    "monitoring.coreos.com/v1",
    "PodMonitor",
    _closed(
        {
            **_MONITOR_COMMON,
            "podMetricsEndpoints": {
                "type": "array",
                "minItems": 1,
                "items": _closed(
                    {
                        **_SCRAPE_ENDPOINT_COMMON,
                        "port": {"type": "string"},
                        "portNumber": {"type": "integer", "minimum": 1, "maximum": 65535},
                        "filterRunning": {"type": "boolean"},
                    }
                ),
            },
        },
        ("selector", "podMetricsEndpoints"),
    ),
)

_RULE: Final = {
    **_closed(
        {
            "record": {"type": "string", "minLength": 1},
            "alert": {"type": "string", "minLength": 1},
            "expr": {"type": ["string", "integer"], "minLength": 1},
            "for": {"type": "string", "pattern": _DURATION},
            "keep_firing_for": {"type": "string", "minLength": 1, "pattern": _DURATION},
            "labels": _STRING_MAP,
            "annotations": _STRING_MAP,
        },
        ("expr",),
    ),
    # Exactly one of record and alert (upstream: +kubebuilder:validation:OneOf=Record,Alert).
    "oneOf": [{"required": ["record"]}, {"required": ["alert"]}],
}
PROMETHEUS_RULE: Final = _root(
    "monitoring.coreos.com/v1",
    "PrometheusRule",
    _closed(
        {
            "groups": {
                "type": "array",
                "minItems": 1,
                "items": _closed(
                    {
                        "name": {"type": "string", "minLength": 1},
                        "labels": _STRING_MAP,
                        "interval": {"type": "string", "pattern": _DURATION},
                        "query_offset": {"type": "string", "pattern": _DURATION},
                        "rules": {"type": "array", "items": _RULE},
                        "partial_response_strategy": {"type": "string", "pattern": "^(?i)(abort|warn)?$"},
                        "limit": {"type": "integer"},
                    },
                    ("name",),
                ),
            }
        },
        ("groups",),
    ),
)

# Embedded Kubernetes types: only their presence and shape here (validated as a pod elsewhere).
_K8S_OBJECT: Final[Schema] = {"type": "object"}
_K8S_LIST: Final[Schema] = {"type": "array", "items": {"type": "object"}}
_SPARK_POD: Final[Schema] = {
    "template": _K8S_OBJECT,
    "cores": {"type": "integer", "minimum": 1},
    "coreLimit": {"type": "string"},
    "coreRequest": {"type": "string"},
    "memory": {"type": "string", "pattern": "^[0-9]+[kmgtpKMGTP]?$"},
    "memoryOverhead": {"type": "string"},
    "image": {"type": "string"},
    "configMaps": _K8S_LIST,
    "secrets": _K8S_LIST,
    "env": _K8S_LIST,
    "envFrom": _K8S_LIST,
    "labels": _STRING_MAP,
    "annotations": _STRING_MAP,
    "volumeMounts": _K8S_LIST,
    "affinity": _K8S_OBJECT,
    "tolerations": _K8S_LIST,
    "podSecurityContext": _K8S_OBJECT,
    "securityContext": _K8S_OBJECT,
    "schedulerName": {"type": "string"},
    "sidecars": _K8S_LIST,
    "initContainers": _K8S_LIST,
    "nodeSelector": _STRING_MAP,
    "terminationGracePeriodSeconds": {"type": "integer"},
    "serviceAccount": {"type": "string"},
    "javaOptions": {"type": "string"},
    "lifecycle": _K8S_OBJECT,
    "priorityClassName": {"type": "string"},
}
SPARK_APPLICATION: Final = _root(
    "sparkoperator.k8s.io/v1beta2",
    "SparkApplication",
    _closed(
        {
            "type": {"enum": ["Java", "Python", "Scala", "R"]},
            "sparkVersion": {"type": "string", "minLength": 1},
            "mode": {"enum": ["cluster", "client", "in-cluster-client"]},
            "proxyUser": {"type": "string"},
            "image": {"type": "string"},
            "imagePullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
            "imagePullSecrets": _STRINGS,
            "mainClass": {"type": "string"},
            "mainApplicationFile": {"type": "string", "minLength": 1},
            "arguments": _STRINGS,
            "sparkConf": _STRING_MAP,
            "hadoopConf": _STRING_MAP,
            "sparkConfigMap": {"type": "string"},
            "hadoopConfigMap": {"type": "string"},
            "volumes": _K8S_LIST,
            "driver": _closed(
                {**_SPARK_POD, "podName": {"type": "string"}, "serviceAnnotations": _STRING_MAP}
            ),
            "executor": _closed(
                {
                    **_SPARK_POD,
                    "instances": {"type": "integer", "minimum": 1},
                    "deleteOnTermination": {"type": "boolean"},
                }
            ),
            "deps": _K8S_OBJECT,
            "restartPolicy": _closed(
                {
                    "type": {"enum": ["Never", "Always", "OnFailure"]},
                    "onSubmissionFailureRetries": {"type": "integer", "minimum": 0},
                    "onFailureRetries": {"type": "integer", "minimum": 0},
                    "onSubmissionFailureRetryInterval": {"type": "integer", "minimum": 1},
                    "onFailureRetryInterval": {"type": "integer", "minimum": 1},
                }
            ),
            "nodeSelector": _STRING_MAP,
            "failureRetries": {"type": "integer"},
            "retryInterval": {"type": "integer"},
            "pythonVersion": {"enum": ["2", "3"]},
            "memoryOverheadFactor": {"type": "string"},
            "timeToLiveSeconds": {"type": "integer"},
        },
        ("type", "sparkVersion", "mainApplicationFile", "driver", "executor"),
    ),
)

_GO_DURATION: Final = "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"
_KEY_USAGE: Final = {
    "enum": [
        "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
        "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
        "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
        "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc",
    ]
}  # fmt: skip
_URLS: Final[Schema] = {"type": "array", "items": {"type": "string", "minLength": 1}}
ISSUER: Final = _root(
    "cert-manager.io/v1",
    "Issuer",
    {
        **_closed(
            {
                "selfSigned": _closed({"crlDistributionPoints": _URLS}),
                "ca": _closed(
                    {
                        "secretName": {"type": "string", "pattern": _DNS_NAME},
                        "crlDistributionPoints": _URLS,
                        "ocspServers": _URLS,
                        "issuingCertificateURLs": _URLS,
                    },
                    ("secretName",),
                ),
            }
        ),
        # One issuer type (upstream IssuerConfig holds exactly one of acme, ca, vault, selfSigned, venafi).
        "minProperties": 1,
        "maxProperties": 1,
    },
)
CERTIFICATE: Final = _root(
    "cert-manager.io/v1",
    "Certificate",
    _closed(
        {
            "commonName": {"type": "string", "minLength": 1, "maxLength": 64},
            "duration": {"type": "string", "pattern": _GO_DURATION},
            "renewBefore": {"type": "string", "pattern": _GO_DURATION},
            "dnsNames": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "string", "pattern": "^(\\*\\.)?" + _DNS_NAME.removeprefix("^")},
            },
            "secretName": {"type": "string", "pattern": _DNS_NAME},
            "secretTemplate": _closed({"annotations": _STRING_MAP, "labels": _STRING_MAP}),
            "issuerRef": _closed(
                {
                    "name": {"type": "string", "minLength": 1},
                    "kind": {"type": "string"},
                    "group": {"type": "string"},
                },
                ("name",),
            ),
            "isCA": {"type": "boolean"},
            "usages": {"type": "array", "items": _KEY_USAGE},
            "privateKey": _closed(
                {
                    "rotationPolicy": {"enum": ["Never", "Always"]},
                    "encoding": {"enum": ["PKCS1", "PKCS8"]},
                    "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                    "size": {"type": "integer"},
                }
            ),
            "additionalOutputFormats": {
                "type": "array",
                "items": _closed({"type": {"enum": ["DER", "CombinedPEM"]}}, ("type",)),
            },
            "revisionHistoryLimit": {"type": "integer", "minimum": 1},
        },
        ("secretName", "issuerRef"),
    ),
)

# (apiVersion, kind) -> schema. A kind neither here nor known to kubernetes-validate fails the tests.
CRD_SCHEMAS: Final[dict[tuple[str, str], Schema]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICE_MONITOR,
    ("monitoring.coreos.com/v1", "PodMonitor"): POD_MONITOR,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUS_RULE,
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): SPARK_APPLICATION,
    ("cert-manager.io/v1", "Issuer"): ISSUER,
    ("cert-manager.io/v1", "Certificate"): CERTIFICATE,
}
