#!/usr/bin/env bash
# Reference GKE node pools for tessera (docs/deploy.md, "Node pools"): review, then run with
#   CLUSTER=my-cluster REGION=europe-west4 bash deploy/k8s/nodepools/gke.sh
# Spot pools autoscale from zero; GKE labels their nodes cloud.google.com/gke-spot=true and
# taints them with it, which the workers tolerate (and the dispatcher refuses). Use
# overlays/gpu-gke (components/spot-gke: 15 s pod grace, 12 s drain) with these pools.
set -euo pipefail
: "${CLUSTER:?set CLUSTER}" "${REGION:?set REGION}"
common=(--cluster "$CLUSTER" --region "$REGION" --enable-autoupgrade --enable-autorepair)

# The dispatcher: on-demand, one node per zone it may use (its PVC is zonal).
gcloud container node-pools create tessera-system "${common[@]}" \
  --machine-type e2-standard-4 --num-nodes 1 \
  --disk-type pd-balanced --disk-size 100

# CPU workers: Spot, 8 vCPUs (two 4-CPU workers), a 100 GB disk for two 21 GiB stagings.
gcloud container node-pools create tessera-cpu "${common[@]}" \
  --spot --machine-type c3-standard-8 \
  --enable-autoscaling --total-min-nodes 0 --total-max-nodes 20 --location-policy ANY \
  --num-nodes 0 --node-labels tessera-pool=cpu \
  --disk-type pd-balanced --disk-size 100 \
  --node-taints cloud.google.com/gke-spot=true:NoSchedule

# GPU workers: Spot, one L4 per node with the driver GKE installs, the node's local SSD for
# ephemeral storage (the 41 GiB staging). GKE taints GPU nodes nvidia.com/gpu=present; the
# label is the ScaledJob's nodeSelector. An L4 has 8 NVENC sessions: set the ScaledJob's
# `value` to 8 for this pool (4 is a T4's: nvidia-tesla-t4 on n1-standard-4).
gcloud container node-pools create tessera-gpu "${common[@]}" \
  --spot --machine-type g2-standard-4 \
  --accelerator type=nvidia-l4,count=1,gpu-driver-version=latest \
  --ephemeral-storage-local-ssd count=1 \
  --enable-autoscaling --total-min-nodes 0 --total-max-nodes 8 --location-policy ANY \
  --num-nodes 0 --node-labels tessera-pool=gpu \
  --disk-type pd-balanced --disk-size 100 \
  --node-taints cloud.google.com/gke-spot=true:NoSchedule
