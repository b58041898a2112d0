from django.contrib import admin
from django.urls import path

from django_dbqueue.metrics import metrics_view

urlpatterns = [path("admin/", admin.site.urls), path("metrics/", metrics_view)]
